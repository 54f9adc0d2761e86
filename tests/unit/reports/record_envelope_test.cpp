#include "reports/record_envelope.h"

#include <regex>
#include <string>

#include "libengine/core/build_info.h"
#include "tests/catch.h"

namespace zinf::reports {
namespace {

TEST_CASE("envelope: schema string, generator from build info, timestamp, host") {
  const nlohmann::json envelope = make_record_envelope("plan", 1, snapshot_conditions());
  CHECK(envelope.at("schema") == "zinf.plan/1");
  CHECK(make_record_envelope("bench", 12, {}).at("schema") == "zinf.bench/12");

  const nlohmann::json& generator = envelope.at("generator");
  const BuildInfo& info = build_info();
  CHECK(generator.at("name") == "zinf");
  CHECK(generator.at("version") == std::string(info.version));
  CHECK(generator.at("git_sha") == std::string(info.git_sha));
  CHECK(generator.at("build_type") == std::string(info.build_type));
  CHECK(generator.at("compiler") == std::string(info.compiler));
  REQUIRE(generator.at("features").size() == info.features.size());
  for (const BuildFeature& feature : info.features) {
    const nlohmann::json& described = generator.at("features").at(std::string(feature.name));
    CHECK(described.at("enabled") == feature.enabled);
    CHECK(described.at("detail") == std::string(feature.detail));
  }

  const std::string created_at = envelope.at("created_at");
  CHECK(std::regex_match(created_at, std::regex(R"(^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$)")));

  CHECK(envelope.at("host").is_object());
  CHECK(envelope.at("conditions").is_object());
  CHECK(envelope.size() == 5);
}

TEST_CASE("envelope: host description has every field with the right type") {
  const nlohmann::json host = host_description();
  CHECK(host.at("hostname").is_string());
  CHECK_FALSE(host.at("hostname").get<std::string>().empty());
  CHECK(host.at("cpu_model").is_string());
  CHECK_FALSE(host.at("cpu_model").get<std::string>().empty());
  CHECK(host.at("logical_cpus").is_number_unsigned());
  CHECK(host.at("memory_bytes").is_number_unsigned());
#ifdef __linux__
  CHECK(host.at("memory_bytes").get<std::uint64_t>() > 0);
#endif
  CHECK(host.size() == 4);
}

TEST_CASE("envelope: UTC timestamps") {
  using std::chrono::seconds;
  using std::chrono::system_clock;
  CHECK(format_utc_timestamp(system_clock::time_point{}) == "1970-01-01T00:00:00Z");
  CHECK(format_utc_timestamp(system_clock::time_point{seconds{1709251199}}) == "2024-02-29T23:59:59Z");
  // Sub-second parts are dropped, not rounded.
  CHECK(format_utc_timestamp(system_clock::time_point{seconds{59}} + std::chrono::milliseconds{999}) ==
        "1970-01-01T00:00:59Z");
}

TEST_CASE("envelope: /proc parsers") {
  CHECK(cpu_model_from_cpuinfo("processor\t: 0\nvendor_id\t: GenuineIntel\nmodel name\t: Intel(R) Xeon(R) Gold 6338\n"
                               "processor\t: 1\nmodel name\t: other\n") == "Intel(R) Xeon(R) Gold 6338");
  CHECK(cpu_model_from_cpuinfo("processor\t: 0\nBogoMIPS\t: 50.00\n") == "unknown");
  CHECK(cpu_model_from_cpuinfo("") == "unknown");

  CHECK(memory_bytes_from_meminfo("MemTotal:       131891056 kB\nMemFree:        1 kB\n") == 131891056ULL * 1024);
  CHECK(memory_bytes_from_meminfo("MemFree: 1 kB\n") == 0);
  CHECK(memory_bytes_from_meminfo("MemTotal: lots kB\n") == 0);
  CHECK(memory_bytes_from_meminfo("MemTotal: 12 MB\n") == 0);
  CHECK(memory_bytes_from_meminfo("") == 0);
}

}  // namespace
}  // namespace zinf::reports
