// Engine kinds by name and the factory of io_engine.h. The engines themselves live in
// uring_engine.cpp and posix_engine.cpp; choosing a fallback is the caller's business.
#include "libengine/io/io_engine.h"

#include <fmt/format.h>

#include "libengine/io/posix_engine.h"
#include "libengine/io/uring_engine.h"

namespace zinf::io {

Result<EngineKind> engine_kind_from_name(std::string_view name, std::string_view field) {
  if (name == "uring") return EngineKind::kUring;
  if (name == "posix") return EngineKind::kPosix;
  return Status::invalid_argument(fmt::format("{}: '{}' is not one of uring, posix", field, name));
}

std::string_view engine_kind_name(EngineKind kind) {
  switch (kind) {
    case EngineKind::kUring:
      return "uring";
    case EngineKind::kPosix:
      return "posix";
  }
  return "unknown";
}

Result<std::unique_ptr<IoEngine>> make_io_engine(EngineKind kind, unsigned queue_depth) {
  switch (kind) {
    case EngineKind::kUring: {
      ZINF_ASSIGN_OR_RETURN(auto engine, UringEngine::create(queue_depth));
      return std::unique_ptr<IoEngine>(std::move(engine));
    }
    case EngineKind::kPosix: {
      ZINF_ASSIGN_OR_RETURN(auto engine, PosixEngine::create(queue_depth));
      return std::unique_ptr<IoEngine>(std::move(engine));
    }
  }
  return Status::internal("make_io_engine: unknown engine kind");
}

}  // namespace zinf::io
