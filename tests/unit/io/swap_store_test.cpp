// placeholder: being written in this change
