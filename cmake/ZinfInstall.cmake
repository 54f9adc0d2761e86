# (install rules)
