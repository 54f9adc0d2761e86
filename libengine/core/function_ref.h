// FunctionRef: a non-owning reference to a callable — an object pointer and a call trampoline, no
// allocation — for handing a lambda down a virtual call that runs it at once or not at all
// (Stream::run_if_idle). It is not std::function: it does not own or copy the callable, so it must
// not outlive it; store a std::function where the work is kept for later.
#pragma once

#include <memory>
#include <type_traits>
#include <utility>

namespace zinf {

template <typename Signature>
class FunctionRef;

template <typename R, typename... Args>
class FunctionRef<R(Args...)> {
 public:
  // Refers to `callable`, which must outlive this FunctionRef (a temporary does not).
  template <typename F>
  requires(!std::is_same_v<std::remove_cvref_t<F>, FunctionRef> && std::is_invocable_r_v<R, F&, Args...>)
      FunctionRef(F& callable)
  noexcept  // NOLINT(google-explicit-constructor): passed where a callable is expected
      : object_(const_cast<void*>(static_cast<const void*>(std::addressof(callable)))),
        call_([](void* object, Args... args) -> R {
          return (*static_cast<std::remove_reference_t<F>*>(object))(std::forward<Args>(args)...);
        }) {}

  R operator()(Args... args) const { return call_(object_, std::forward<Args>(args)...); }

 private:
  void* object_;
  R (*call_)(void*, Args...);
};

}  // namespace zinf
