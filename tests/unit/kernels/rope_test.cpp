// RoPE (kernels/rope.h): the inverse frequencies and cos/sin tables against HF transformers' own
// values for the default, linear and llama3 rules and a partial rotary factor; the rotation and its
// backward against an fp64 reference (with the same fp32 tables), finite differences of that
// reference, HF's q * cos + rotate_half(q) * sin evaluated in fp32, and each other (the backward
// undoes the forward), in the attention kernel's fused qkv layout with grouped K/V heads, head sizes
// 6, 18, 64 (partial), 80 (partial) and 128, one row, position offsets; every variant and thread
// count bit for bit, in place and out of place.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <iterator>
#include <random>
#include <vector>

#include "kernels/cpu/cpu_features.h"
#include "kernels/rope.h"
#include "tests/catch.h"
#include "tests/unit/kernels/kernel_test_support.h"

namespace zinf::kernels {
namespace {

using test_support::count_misses;
using test_support::finite_difference;
using test_support::supported_isas;
using test_support::uniform_values;
using test_support::widen;

using cpu::Isa;
using cpu::RopeShape;

// ---- Tables against HF ---------------------------------------------------------------------------

// Positions at which HfCase holds cos and sin.
constexpr std::size_t kHfPositions[] = {0, 1, 7, 1000, 8191, 100000};

struct HfCase {
  std::size_t head_dim;
  double partial_rotary_factor;
  RopeScaling scaling;
  double theta;
  double factor;
  std::vector<float> inv_freq;          // all rd/2 of them
  std::vector<std::size_t> indices;     // the pairs cos and sin are given for
  std::vector<std::vector<float>> cos;  // [kHfPositions][indices]
  std::vector<std::vector<float>> sin;  // [kHfPositions][indices]
};

// Pasted from `.venv/bin/python scripts/fixtures/make_rope_tables.py` (transformers 5.24.0, torch
// 2.15.0+cu132): HF's inv_freq from LlamaRotaryEmbedding.compute_default_rope_parameters,
// PhiRotaryEmbedding.compute_default_rope_parameters (Phi-2's head_dim 80, partial_rotary_factor
// 0.4), ROPE_INIT_FUNCTIONS["linear"] (factor 4) and ROPE_INIT_FUNCTIONS["llama3"] (Llama-3.1:
// factor 8, low_freq_factor 1, high_freq_factor 4, original_max_position_embeddings 8192, theta
// 5e5), and cos/sin of (position_ids.float() * inv_freq) as the models' RotaryEmbedding.forward.
const std::vector<HfCase>& hf_cases() {
  static const std::vector<HfCase> cases = {
      {
          // default, theta 1e4, head_dim 64
          64,
          1.0,
          RopeScaling::kDefault,
          10000.0,
          1.0,
          {1.0f,           0.749894202f,    0.562341332f,    0.421696514f,    0.316227764f,    0.237137362f,
           0.177827939f,   0.133352146f,    0.100000001f,    0.0749894157f,   0.0562341288f,   0.0421696492f,
           0.0316227786f,  0.0237137359f,   0.0177827943f,   0.0133352149f,   0.00999999978f,  0.00749894232f,
           0.00562341325f, 0.00421696482f,  0.00316227786f,  0.00237137382f,  0.00177827943f,  0.00133352145f,
           0.00100000005f, 0.000749894185f, 0.000562341302f, 0.000421696488f, 0.000316227786f, 0.000237137385f,
           0.00017782794f, 0.00013335215f},
          {0, 1, 5, 17, 31},
          {{1.0f, 1.0f, 1.0f, 1.0f, 1.0f},
           {0.540302336f, 0.731760979f, 0.972014427f, 0.999971867f, 1.0f},
           {0.753902256f, 0.511449277f, -0.0890471488f, 0.998622596f, 0.999999583f},
           {0.562379062f, -0.584592879f, -0.0528610758f, 0.347627163f, 0.991121769f},
           {-0.646390498f, -0.842082798f, 0.63109684f, 0.162061095f, 0.460456073f},
           {-0.9993608f, 0.923086524f, 0.544520676f, -0.584592879f, 0.718714893f}},
          {{0.0f, 0.0f, 0.0f, 0.0f, 0.0f},
           {0.841470957f, 0.681561351f, 0.234921068f, 0.007498872f, 0.00013335215f},
           {0.656986594f, -0.859313488f, 0.99602741f, 0.0524684936f, 0.000933464966f},
           {0.826879561f, 0.811326802f, -0.998601854f, 0.937632859f, 0.132957265f},
           {-0.763006806f, -0.539348304f, 0.775704026f, -0.986780703f, 0.887682498f},
           {0.0357487984f, -0.384592384f, 0.838747442f, 0.811326802f, 0.695304871f}},
      },
      {
          // Phi-2's default: theta 1e4, head_dim 80, partial_rotary_factor 0.4 (rotary_dim 32)
          80,
          0.4,
          RopeScaling::kDefault,
          10000.0,
          1.0,
          {1.0f, 0.562341332f, 0.316227764f, 0.177827939f, 0.100000001f, 0.0562341288f, 0.0316227786f, 0.0177827943f,
           0.00999999978f, 0.00562341325f, 0.00316227786f, 0.00177827943f, 0.00100000005f, 0.000562341302f,
           0.000316227786f, 0.00017782794f},
          {0, 1, 5, 15},
          {{1.0f, 1.0f, 1.0f, 1.0f},
           {0.540302336f, 0.846009076f, 0.998419285f, 1.0f},
           {0.753902256f, -0.700429797f, 0.923519492f, 0.999999225f},
           {0.562379062f, -0.999992847f, 0.950938582f, 0.98423022f},
           {-0.646390498f, 0.845729709f, -0.362002552f, 0.113959588f},
           {-0.9993608f, 0.93025589f, 0.999287009f, 0.482962996f}},
          {{0.0f, 0.0f, 0.0f, 0.0f},
           {0.841470957f, 0.533168435f, 0.0562044941f, 0.00017782794f},
           {0.656986594f, -0.713721275f, 0.383551538f, 0.00124479528f},
           {0.826879561f, 0.00377638987f, -0.309379756f, 0.176892191f},
           {-0.763006806f, 0.533611536f, 0.932177126f, 0.993485391f},
           {0.0357487984f, -0.366911471f, -0.0377550125f, -0.87564075f}},
      },
      {
          // linear, factor 4, theta 1e4, head_dim 64
          64,
          1.0,
          RopeScaling::kLinear,
          10000.0,
          4.0,
          {0.25f,           0.18747355f,     0.140585333f,    0.105424128f,    0.079056941f,    0.0592843406f,
           0.0444569848f,   0.0333380364f,   0.0250000004f,   0.0187473539f,   0.0140585322f,   0.0105424123f,
           0.00790569466f,  0.00592843397f,  0.00444569858f,  0.00333380373f,  0.00249999994f,  0.00187473558f,
           0.00140585331f,  0.00105424121f,  0.000790569466f, 0.000592843455f, 0.000444569858f, 0.000333380362f,
           0.000250000012f, 0.000187473546f, 0.000140585325f, 0.000105424122f, 7.90569466e-05f, 5.92843462e-05f,
           4.44569851e-05f, 3.33380376e-05f},
          {0, 1, 5, 17, 31},
          {{1.0f, 1.0f, 1.0f, 1.0f, 1.0f},
           {0.968912423f, 0.982478261f, 0.998243213f, 0.999998271f, 1.0f},
           {-0.178246051f, 0.255612761f, 0.915120184f, 0.999913871f, 1.0f},
           {0.240988299f, 0.521658421f, -0.918739319f, -0.29928124f, 0.999444366f},
           {0.842757821f, -0.800311089f, -0.220139503f, -0.938683569f, 0.962947011f},
           {0.700757742f, -0.0985314175f, -0.969222248f, 0.521658421f, -0.981584251f}},
          {{0.0f, 0.0f, 0.0f, 0.0f, 0.0f},
           {0.247403964f, 0.186377317f, 0.0592496209f, 0.00187473453f, 3.33380376e-05f},
           {0.98398596f, 0.966779232f, 0.403181136f, 0.0131227728f, 0.000233366271f},
           {-0.970528007f, -0.85315448f, 0.394864649f, 0.954164982f, 0.0333318599f},
           {-0.538292885f, 0.599584937f, 0.975468397f, 0.344779938f, 0.269690752f},
           {-0.713399351f, -0.995133936f, -0.246187493f, -0.85315448f, -0.191029638f}},
      },
      {
          // llama3 (Llama-3.1: factor 8, low 1, high 4, original 8192), theta 5e5, head_dim 128
          128,
          1.0,
          RopeScaling::kLlama3,
          500000.0,
          8.0,
          {1.0f,
           0.814617217f,
           0.663601279f,
           0.540580988f,
           0.440366626f,
           0.358730227f,
           0.292227834f,
           0.238053814f,
           0.193922758f,
           0.157972813f,
           0.128687382f,
           0.10483095f,
           0.0853971019f,
           0.0695659518f,
           0.0566696189f,
           0.0461640507f,
           0.0376060307f,
           0.0306345206f,
           0.0249554086f,
           0.0203291047f,
           0.0165604409f,
           0.0134904198f,
           0.0109895291f,
           0.00895225909f,
           0.00729266508f,
           0.00594073068f,
           0.00483942125f,
           0.00394227589f,
           0.00321144611f,
           0.00216657063f,
           0.00137189368f,
           0.00085675146f,
           0.000524846022f,
           0.00031269365f,
           0.000178507791f,
           9.55621217e-05f,
           7.78465546e-05f,
           6.34151438e-05f,
           5.16590699e-05f,
           4.20823671e-05f,
           3.42810235e-05f,
           2.79259093e-05f,
           2.2748929e-05f,
           1.85316694e-05f,
           1.50962178e-05f,
           1.22976389e-05f,
           1.00178686e-05f,
           8.1607277e-06f,
           6.64786967e-06f,
           5.41546933e-06f,
           4.41153452e-06f,
           3.59371188e-06f,
           2.92749974e-06f,
           2.38479174e-06f,
           1.94269251e-06f,
           1.58255079e-06f,
           1.28917316e-06f,
           1.05018262e-06f,
           8.55496921e-07f,
           6.96902532e-07f,
           5.6770881e-07f,
           4.6246538e-07f,
           3.7673226e-07f,
           3.06892588e-07f},
          {0, 1, 20, 28, 29, 33, 35, 36, 40, 63},
          {{1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f},
           {0.540302336f, 0.686146915f, 0.99986285f, 0.999994874f, 0.999997675f, 0.99999994f, 1.0f, 1.0f, 1.0f, 1.0f},
           {0.753902256f, 0.835988462f, 0.993288457f, 0.999747336f, 0.999885023f, 0.999997616f, 0.999999762f,
            0.999999881f, 1.0f, 1.0f},
           {0.562379062f, -0.585993946f, -0.658120334f, -0.997561216f, -0.561149836f, 0.951508403f, 0.995437384f,
            0.996971488f, 0.999412477f, 0.99999994f},
           {-0.646390498f, 0.977398813f, -0.848267138f, 0.388112843f, 0.450763315f, -0.836287737f, 0.708977282f,
            0.803502202f, 0.960835218f, 0.999996841f},
           {-0.9993608f, 0.975625575f, -0.911146343f, 0.763441026f, -0.993640959f, 0.989279091f, -0.99137491f,
            0.0692705438f, -0.959236145f, 0.999529123f}},
          {{0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f},
           {0.841470957f, 0.727463007f, 0.0165596846f, 0.00321144052f, 0.002166569f, 0.00031269365f, 9.55621217e-05f,
            7.78465546e-05f, 3.42810235e-05f, 3.06892588e-07f},
           {0.656986594f, -0.548747063f, 0.115663625f, 0.0224782303f, 0.0151654128f, 0.00218885369f, 0.000668934779f,
            0.000544925861f, 0.000239967165f, 2.14824809e-06f},
           {0.826879561f, -0.81031543f, -0.75291276f, -0.0697965994f, 0.827714205f, 0.30762279f, 0.0954167396f,
            0.0777679533f, 0.0342743099f, 0.000306892587f},
           {-0.763006806f, -0.211403862f, -0.529568493f, 0.921611845f, -0.892643511f, 0.548290789f, 0.705231309f,
            0.595301747f, 0.277120441f, 0.00251375465f},
           {0.0357487984f, 0.219441921f, -0.41208294f, 0.645877481f, 0.112595104f, -0.146037102f, -0.131056368f,
            0.997597933f, -0.282605827f, 0.0306844413f}},
      },
  };
  return cases;
}

RopeFrequencies frequencies_of(const HfCase& c) {
  RopeFrequencies f;
  f.rotary_dim = rope_rotary_dim(c.head_dim, c.partial_rotary_factor);
  f.theta = c.theta;
  f.scaling = c.scaling;
  f.factor = c.factor;
  f.low_freq_factor = 1.0;
  f.high_freq_factor = 4.0;
  f.original_max_position_embeddings = 8192.0;
  return f;
}

// Distance in units in the last place between two finite floats of the same sign.
std::int64_t ulps(float a, float b) {
  return std::llabs(static_cast<std::int64_t>(std::bit_cast<std::int32_t>(a)) -
                    static_cast<std::int64_t>(std::bit_cast<std::int32_t>(b)));
}

TEST_CASE("rope tables: rotary_dim, inv_freq and cos/sin equal HF transformers' values", "[model][rope]") {
  CHECK(rope_rotary_dim(64, 1.0) == 64);
  CHECK(rope_rotary_dim(80, 0.4) == 32);
  CHECK(rope_rotary_dim(64, 0.25) == 16);
  CHECK(rope_rotary_dim(128, 0.5) == 64);
  for (const HfCase& c : hf_cases()) {
    const RopeFrequencies f = frequencies_of(c);
    INFO("head_dim " << c.head_dim << ", rope_type " << static_cast<int>(c.scaling));
    REQUIRE(f.rotary_dim / 2 == c.inv_freq.size());
    const std::size_t half = f.rotary_dim / 2;
    std::vector<float> inv(half);
    rope_inv_freq(inv.data(), f);
    // theta ** x is pow in double rounded once here, torch's fp32 pow there, which could differ by
    // an ulp; for these four configurations every value is HF's bits.
    for (std::size_t i = 0; i < half; ++i) {
      INFO("inv_freq[" << i << "] = " << inv[i] << ", HF " << c.inv_freq[i]);
      CHECK(ulps(inv[i], c.inv_freq[i]) == 0);
    }
    // cos/sin from HF's inv_freq and from ours (the same bits, so the fp32 angles are HF's bits):
    // within 1e-7 (torch's fp32 cos/sin against ours, correctly rounded from double).
    const std::size_t positions = kHfPositions[std::size(kHfPositions) - 1] + 1;
    std::vector<float> cos(positions * half);
    std::vector<float> sin(positions * half);
    for (const bool ours : {false, true}) {
      rope_tables(cos.data(), sin.data(), ours ? inv.data() : c.inv_freq.data(), half, positions);
      for (std::size_t p = 0; p < std::size(kHfPositions); ++p) {
        for (std::size_t k = 0; k < c.indices.size(); ++k) {
          const std::size_t at = kHfPositions[p] * half + c.indices[k];
          INFO("position " << kHfPositions[p] << ", pair " << c.indices[k] << (ours ? ", our inv_freq" : ""));
          CHECK(std::fabs(cos[at] - c.cos[p][k]) <= 1e-7f);
          CHECK(std::fabs(sin[at] - c.sin[p][k]) <= 1e-7f);
        }
      }
    }
  }
}

// ---- The rotation --------------------------------------------------------------------------------

// One test shape in the fused qkv layout: NH query heads, then NKV key heads, then NKV value heads
// per row; the rotation covers the first NH + NKV heads.
struct QkvShape {
  std::size_t batch, seq_len, q_heads, kv_heads, head_dim, rotary_dim, pos_offset;

  std::size_t row_stride() const { return (q_heads + 2 * kv_heads) * head_dim; }
  std::size_t size() const { return batch * seq_len * row_stride(); }
  RopeShape rope() const {
    return {batch, seq_len, row_stride(), q_heads + kv_heads, head_dim, rotary_dim, pos_offset};
  }
};

struct Tables {
  std::vector<float> cos, sin;
};

Tables tables_for(const QkvShape& s, double theta) {
  RopeFrequencies f;
  f.rotary_dim = s.rotary_dim;
  f.theta = theta;
  const std::size_t half = s.rotary_dim / 2;
  std::vector<float> inv(half);
  rope_inv_freq(inv.data(), f);
  Tables t{std::vector<float>((s.pos_offset + s.seq_len) * half),
           std::vector<float>((s.pos_offset + s.seq_len) * half)};
  rope_tables(t.cos.data(), t.sin.data(), inv.data(), half, s.pos_offset + s.seq_len);
  return t;
}

// The rotation in fp64 with the fp32 tables (sign -1: the backward's inverse rotation); elements
// outside the rotated heads keep their value.
std::vector<double> rope_reference(const std::vector<double>& x, const QkvShape& s, const Tables& t, double sign) {
  std::vector<double> y = x;
  const std::size_t half = s.rotary_dim / 2;
  for (std::size_t row = 0; row < s.batch * s.seq_len; ++row) {
    const std::size_t position = s.pos_offset + row % s.seq_len;
    for (std::size_t head = 0; head < s.q_heads + s.kv_heads; ++head) {
      const std::size_t o = row * s.row_stride() + head * s.head_dim;
      for (std::size_t i = 0; i < half; ++i) {
        const double c = t.cos[position * half + i];
        const double sn = sign * static_cast<double>(t.sin[position * half + i]);
        y[o + i] = x[o + i] * c - x[o + half + i] * sn;
        y[o + half + i] = x[o + half + i] * c + x[o + i] * sn;
      }
    }
  }
  return y;
}

const QkvShape kShapes[] = {
    {2, 5, 3, 1, 6, 6, 0},       // head_dim 6, MQA (one K/V head)
    {1, 1, 2, 2, 18, 18, 3},     // one row, head_dim 18, offset positions
    {2, 7, 4, 2, 64, 16, 11},    // partial: rotary_dim 16 of 64 (GQA 4:2)
    {1, 9, 2, 1, 80, 32, 100},   // Phi-2's head: 32 of 80 rotate
    {3, 33, 4, 4, 128, 128, 0},  // 99 rows of 8 heads x 128: split over threads
    {2, 70, 32, 4, 64, 64, 5},   // TinyLlama's heads (32 query, 4 K/V, head_dim 64)
};

TEST_CASE("rope: forward and backward match fp64, every variant and thread count, in place", "[model][rope]") {
  for (const QkvShape& s : kShapes) {
    INFO("B " << s.batch << " T " << s.seq_len << " NH " << s.q_heads << " NKV " << s.kv_heads << " hd " << s.head_dim
              << " rd " << s.rotary_dim << " offset " << s.pos_offset);
    std::mt19937_64 rng(61 + s.head_dim + s.seq_len);
    const Tables t = tables_for(s, 10000.0);
    const auto inp = uniform_values(s.size(), -2.0f, 2.0f, rng);
    const auto dout = uniform_values(s.size(), -1.0f, 1.0f, rng);
    const auto out_ref = rope_reference(widen(inp), s, t, 1.0);
    const auto din_ref = rope_reference(widen(dout), s, t, -1.0);
    std::vector<float> first_out;
    std::vector<float> first_din;
    for (Isa isa : supported_isas()) {
      for (int threads : {1, 3}) {
        INFO(cpu::isa_name(isa) << ", " << threads << " threads");
        // Out of place into a sentinel-filled buffer: the V heads must stay sentinel.
        std::vector<float> out(s.size(), 7.0f);
        cpu::rope_forward(isa, out.data(), inp.data(), t.cos.data(), t.sin.data(), s.rope(), threads);
        std::vector<float> out_v = out;
        for (std::size_t row = 0; row < s.batch * s.seq_len; ++row) {
          for (std::size_t e = (s.q_heads + s.kv_heads) * s.head_dim; e < s.row_stride(); ++e) {
            CHECK(out[row * s.row_stride() + e] == 7.0f);
            out_v[row * s.row_stride() + e] = inp[row * s.row_stride() + e];
          }
        }
        CHECK(count_misses("out", out_v, out_ref, 1e-6, 1e-6) == 0);
        std::vector<float> in_place = inp;
        cpu::rope_forward(isa, in_place.data(), in_place.data(), t.cos.data(), t.sin.data(), s.rope(), threads);
        CHECK(in_place == out_v);

        std::vector<float> din = dout;
        cpu::rope_backward(isa, din.data(), din.data(), t.cos.data(), t.sin.data(), s.rope(), threads);
        CHECK(count_misses("dinp", din, din_ref, 1e-6, 1e-6) == 0);
        // The backward undoes the forward (a rotation by -theta), up to rounding.
        std::vector<float> round_trip = in_place;
        cpu::rope_backward(isa, round_trip.data(), round_trip.data(), t.cos.data(), t.sin.data(), s.rope(), threads);
        CHECK(count_misses("round trip", round_trip, widen(inp), 1e-6, 1e-6) == 0);
        if (first_out.empty()) {
          first_out = out_v;
          first_din = din;
          continue;
        }
        CHECK(out_v == first_out);
        CHECK(din == first_din);
      }
    }
  }
}

TEST_CASE("rope: the forward is HF's q * cos + rotate_half(q) * sin in fp32, bit for bit", "[model][rope]") {
  const QkvShape s{1, 4, 2, 1, 18, 18, 2};
  const Tables t = tables_for(s, 500000.0);
  std::mt19937_64 rng(62);
  const auto inp = uniform_values(s.size(), -3.0f, 3.0f, rng);
  std::vector<float> out(s.size());
  cpu::rope_forward(out.data(), inp.data(), t.cos.data(), t.sin.data(), s.rope(), 1);
  const std::size_t half = s.rotary_dim / 2;
  for (std::size_t row = 0; row < s.seq_len; ++row) {
    for (std::size_t head = 0; head < 3; ++head) {
      const float* q = inp.data() + row * s.row_stride() + head * s.head_dim;
      const float* y = out.data() + row * s.row_stride() + head * s.head_dim;
      for (std::size_t d = 0; d < s.head_dim; ++d) {
        // emb = cat(freqs, freqs): cos and sin of pair d % half; rotate_half(q) = cat(-q2, q1).
        const float c = t.cos[(s.pos_offset + row) * half + d % half];
        const float sn = t.sin[(s.pos_offset + row) * half + d % half];
        const float rotated = d < half ? -q[d + half] : q[d - half];
        const float q_cos = q[d] * c;
        const float r_sin = rotated * sn;
        CHECK(y[d] == q_cos + r_sin);
      }
    }
  }
}

TEST_CASE("rope: backward matches finite differences of the fp64 forward", "[model][rope]") {
  // L = sum(rope(x) * probe): dL/dx is the backward of probe. Partial rotation, so the pass-through
  // dimensions' gradient (probe itself) is checked too; the V heads' gradient is zero (untouched).
  const QkvShape s{2, 3, 2, 1, 10, 6, 4};
  const Tables t = tables_for(s, 10000.0);
  std::mt19937_64 rng(63);
  const auto inp = uniform_values(s.size(), -2.0f, 2.0f, rng);
  const auto probe = uniform_values(s.size(), -1.0f, 1.0f, rng);
  std::vector<double> x = widen(inp);
  const auto loss = [&] {
    const auto y = rope_reference(x, s, t, 1.0);
    double sum = 0.0;
    for (std::size_t row = 0; row < s.batch * s.seq_len; ++row) {
      for (std::size_t e = 0; e < (s.q_heads + s.kv_heads) * s.head_dim; ++e) {
        sum += y[row * s.row_stride() + e] * static_cast<double>(probe[row * s.row_stride() + e]);
      }
    }
    return sum;
  };
  const std::vector<double> dx_ref = finite_difference(x, loss);
  for (Isa isa : supported_isas()) {
    INFO(cpu::isa_name(isa));
    std::vector<float> dinp(s.size(), 0.0f);
    cpu::rope_backward(isa, dinp.data(), probe.data(), t.cos.data(), t.sin.data(), s.rope(), 1);
    CHECK(count_misses("dinp", dinp, dx_ref, 1e-6, 1e-7) == 0);
  }
}

}  // namespace
}  // namespace zinf::kernels
