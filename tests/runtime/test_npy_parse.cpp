// Tests for the .npy parser/serializer on hand-written byte strings.
#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "opforge/npy.hpp"

using namespace opforge::npy;

namespace {

const std::string kOrigin = "inputs/x.npy";

// Little-endian bytes of an n-byte value.
std::string le(uint64_t v, int n) {
  std::string out;
  for (int i = 0; i < n; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
  return out;
}

// Float32 bytes from the IEEE-754 bit pattern written out by hand.
std::string f32(uint32_t bits) {
  return le(bits, 4);
}

const std::string kMagic("\x93NUMPY", 6);

// A version 1.0 file: magic, 1, 0, u16 header length, header, data.
std::string v1(const std::string& header, const std::string& data) {
  return kMagic + std::string("\x01\x00", 2) + le(header.size(), 2) + header + data;
}

// A version 2.0 / 3.0 file: magic, major, 0, u32 header length, header, data.
std::string v2(const std::string& header, const std::string& data, int major = 2) {
  return kMagic + static_cast<char>(major) + std::string(1, '\0') + le(header.size(), 4) + header +
         data;
}

std::string f4_header(const std::string& shape) {
  return "{'descr': '<f4', 'fortran_order': False, 'shape': " + shape + ", }\n";
}

bool starts_with(const std::string& s, const std::string& p) {
  return s.rfind(p, 0) == 0;
}
bool contains(const std::string& s, const std::string& p) {
  return s.find(p) != std::string::npos;
}

// The NpyError message parse() throws for `bytes`, or "<no error>".
std::string error_of(const std::string& bytes) {
  try {
    parse(bytes, kOrigin);
  } catch (const NpyError& e) {
    return e.what();
  }
  return "<no error>";
}

#define CHECK_NPY_ERROR(bytes, phrase)        \
  do {                                        \
    const std::string msg_ = error_of(bytes); \
    INFO("message: " << msg_);                \
    CHECK(starts_with(msg_, kOrigin + ": ")); \
    CHECK(contains(msg_, phrase));            \
  } while (0)

std::vector<float> floats_of(const Array& a) {
  return to_f32(a, "test");
}

}  // namespace

TEST_SUITE("npy.parse") {
  TEST_CASE("fully hand-written v1.0 file, 1-d float32") {
    // Header of 57 characters + 60 spaces + '\n' = 118 = 0x76 bytes; preamble 10 + 118 = 128.
    const std::string bytes = std::string("\x93NUMPY\x01\x00\x76\x00", 10) +
                              "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }" +
                              std::string(60, ' ') + "\n" +
                              std::string("\x00\x00\xc0\x3f", 4)     // 1.5f = 0x3FC00000
                              + std::string("\x00\x00\x00\xc0", 4);  // -2.0f = 0xC0000000
    REQUIRE(bytes.size() == 136);
    const Array a = parse(bytes, kOrigin);
    CHECK(a.descr == "<f4");
    CHECK(a.shape == std::vector<int64_t>{2});
    CHECK(a.elements() == 2);
    CHECK(a.item_size() == 4);
    REQUIRE(a.data.size() == 8);
    CHECK(floats_of(a) == std::vector<float>{1.5f, -2.0f});
  }

  TEST_CASE("v1.0 2-d float32 with known values") {
    const std::string data = f32(0x3FC00000) + f32(0xC0000000) + f32(0x3E800000) + f32(0x40400000) +
                             f32(0xBF000000) + f32(0x42C80000);
    const Array a = parse(v1(f4_header("(2, 3)"), data), kOrigin);
    CHECK(a.shape == std::vector<int64_t>{2, 3});
    CHECK(a.elements() == 6);
    CHECK(floats_of(a) == std::vector<float>{1.5f, -2.0f, 0.25f, 3.0f, -0.5f, 100.0f});
  }

  TEST_CASE("v2.0 and v3.0 headers (u32 header length)") {
    const std::string data = f32(0x3FC00000) + f32(0x3E800000);
    for (int major : {2, 3}) {
      CAPTURE(major);
      const Array a = parse(v2(f4_header("(1, 2)"), data, major), kOrigin);
      CHECK(a.shape == std::vector<int64_t>{1, 2});
      CHECK(floats_of(a) == std::vector<float>{1.5f, 0.25f});
    }
  }

  TEST_CASE("0-d array: shape () holds one element") {
    const Array a = parse(v1(f4_header("()"), f32(0x40400000)), kOrigin);
    CHECK(a.shape.empty());
    CHECK(a.elements() == 1);
    CHECK(floats_of(a) == std::vector<float>{3.0f});
  }

  TEST_CASE("empty arrays: a zero dimension means no data") {
    const Array a = parse(v1(f4_header("(0, 5)"), ""), kOrigin);
    CHECK(a.shape == std::vector<int64_t>{0, 5});
    CHECK(a.elements() == 0);
    CHECK(a.data.empty());
    // A zero dimension next to huge ones is still an empty array, not an overflow.
    const Array b =
        parse(v1(f4_header("(4611686018427387904, 0, 4611686018427387904)"), ""), kOrigin);
    CHECK(b.elements() == 0);
  }

  TEST_CASE("header syntax variants") {
    const std::string d = f32(0x3FC00000) + f32(0xC0000000);
    SUBCASE("double quotes, key order, no trailing comma") {
      const Array a =
          parse(v1("{\"shape\": (2,), \"fortran_order\": False, \"descr\": \"<f4\"}", d), kOrigin);
      CHECK(a.shape == std::vector<int64_t>{2});
      CHECK(a.descr == "<f4");
    }
    SUBCASE("newlines and tabs between tokens, padding after the dict") {
      const Array a =
          parse(v1("\n{ 'descr' :\t'<f4' ,\n 'fortran_order':False,'shape':(\n 2 , ) ,\n}"
                   "        \n",
                   d),
                kOrigin);
      CHECK(a.shape == std::vector<int64_t>{2});
    }
    SUBCASE("tuple with trailing comma and no spaces") {
      const Array a =
          parse(v1("{'descr':'<f4','fortran_order':False,'shape':(1,2,),}", d), kOrigin);
      CHECK(a.shape == std::vector<int64_t>{1, 2});
    }
    SUBCASE("escaped quote in a string value is decoded (and then rejected as descr)") {
      CHECK_NPY_ERROR(v1("{'descr': '<f\\'4', 'fortran_order': False, 'shape': (2,)}", d),
                      "unsupported dtype descr '<f'4'");
    }
  }

  TEST_CASE("all supported dtypes") {
    struct Case {
      const char* descr;
      const char* canonical;
      int size;
      std::string one;  // the value 1.5 (or 1 / True) in that dtype
    };
    const Case cases[] = {
        {"<f2", "<f2", 2, le(0x3E00, 2)},
        {"<f4", "<f4", 4, le(0x3FC00000, 4)},
        {"<f8", "<f8", 8, le(0x3FF8000000000000ull, 8)},
        {"<i4", "<i4", 4, le(1, 4)},
        {"<i8", "<i8", 8, le(1, 8)},
        {"|u1", "|u1", 1, le(1, 1)},
        {"|b1", "|b1", 1, le(1, 1)},
        {"=u1", "|u1", 1, le(1, 1)},
        {"<b1", "|b1", 1, le(1, 1)},
        {"=b1", "|b1", 1, le(1, 1)},
        {"<u2", "<u2", 2, le(1, 2)},
        // bf16 1.5 (0x3FC0): ml_dtypes.bfloat16 saved by np.save, and numpy's plain V2.
        {"<V2", "<V2", 2, le(0x3FC0, 2)},
        {"|V2", "|V2", 2, le(0x3FC0, 2)},
    };
    for (const Case& c : cases) {
      CAPTURE(c.descr);
      const std::string header =
          std::string("{'descr': '") + c.descr + "', 'fortran_order': False, 'shape': (3,), }";
      const Array a = parse(v1(header, c.one + c.one + c.one), kOrigin);
      CHECK(a.descr == c.canonical);
      CHECK(a.item_size() == c.size);
      CHECK(a.data.size() == static_cast<size_t>(3 * c.size));
      CHECK(std::string(a.data.begin(), a.data.end()) == c.one + c.one + c.one);
    }
  }

  TEST_CASE("serialize -> parse round trip") {
    const std::vector<std::vector<int64_t>> shapes = {{}, {1}, {5}, {2, 3}, {2, 1, 3}, {0}, {4, 0}};
    for (const auto& shape : shapes) {
      int64_t n = 1;
      for (int64_t d : shape) n *= d;
      std::vector<float> values;
      for (int64_t i = 0; i < n; ++i) values.push_back(0.5f * static_cast<float>(i) - 1.25f);
      const Array a = from_f32(values, shape);
      const std::string bytes = serialize(a);
      const Array b = parse(bytes, kOrigin);
      CHECK(b.descr == "<f4");
      CHECK(b.shape == shape);
      CHECK(b.data == a.data);
      CHECK(to_f32(b, "rt") == values);
    }
    // Non-float dtypes round trip as raw bytes.
    Array i8;
    i8.descr = "<i8";
    i8.shape = {2};
    i8.data = {1, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
    const Array back = parse(serialize(i8), kOrigin);
    CHECK(back.descr == "<i8");
    CHECK(back.data == i8.data);
  }

  TEST_CASE("serialize writes a v1.0 header padded to a multiple of 64") {
    for (const auto& shape : std::vector<std::vector<int64_t>>{
             {}, {3}, {2, 3}, {1234567, 89}, {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1}}) {
      Array a;
      a.descr = "|u1";
      a.shape = shape;
      int64_t n = 1;
      for (int64_t d : shape) n *= d;
      a.data.assign(static_cast<size_t>(n), 7);
      const std::string bytes = serialize(a);
      REQUIRE(bytes.size() >= 10);
      CHECK(bytes.compare(0, 8, kMagic + std::string("\x01\x00", 2)) == 0);
      const size_t hlen = static_cast<unsigned char>(bytes[8]) |
                          (static_cast<size_t>(static_cast<unsigned char>(bytes[9])) << 8);
      const size_t preamble = 10 + hlen;
      CHECK(preamble % 64 == 0);
      CHECK(bytes.size() == preamble + static_cast<size_t>(n));
      CHECK(bytes[preamble - 1] == '\n');
    }
  }

  TEST_CASE("serialize header text matches NumPy's repr") {
    auto header_of = [](const Array& a) {
      const std::string b = serialize(a);
      const size_t hlen = static_cast<unsigned char>(b[8]) |
                          (static_cast<size_t>(static_cast<unsigned char>(b[9])) << 8);
      std::string h = b.substr(10, hlen);
      return h.substr(0, h.find_last_not_of(" \n") + 1);
    };
    CHECK(header_of(from_f32({1, 2, 3}, {3})) ==
          "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }");
    CHECK(header_of(from_f32({1}, {})) ==
          "{'descr': '<f4', 'fortran_order': False, 'shape': (), }");
    CHECK(header_of(from_f32({1, 2, 3, 4, 5, 6}, {2, 3})) ==
          "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }");
    Array b;
    b.descr = "=b1";  // normalized on output
    b.shape = {1};
    b.data = {1};
    CHECK(header_of(b) == "{'descr': '|b1', 'fortran_order': False, 'shape': (1,), }");
  }

  TEST_CASE("serialize rejects inconsistent arrays") {
    Array a = from_f32({1, 2, 3}, {3});
    a.data.pop_back();
    CHECK_THROWS_WITH_AS(serialize(a), doctest::Contains("needs 12"), NpyError);
    a = from_f32({1, 2, 3}, {3});
    a.descr = ">f4";
    CHECK_THROWS_WITH_AS(serialize(a), doctest::Contains("big-endian"), NpyError);
    a = from_f32({1, 2, 3}, {3});
    a.shape = {-3};
    CHECK_THROWS_WITH_AS(serialize(a), doctest::Contains("negative dimension"), NpyError);
  }

  TEST_CASE("from_f32 / to_f32") {
    const Array a = from_f32({1.5f, -2.0f}, {2});
    CHECK(a.descr == "<f4");
    CHECK(std::string(a.data.begin(), a.data.end()) == f32(0x3FC00000) + f32(0xC0000000));
    CHECK_THROWS_WITH_AS(from_f32({1, 2, 3}, {2, 2}),
                         doctest::Contains("has 4 elements but 3 values"), NpyError);
    Array d;
    d.descr = "<f8";
    d.shape = {1};
    d.data.assign(8, 0);
    CHECK_THROWS_WITH_AS(to_f32(d, "weights.npy"),
                         "weights.npy: expected dtype '<f4' (float32), found '<f8'", NpyError);
  }

  TEST_CASE("Array::elements and item_size") {
    Array a;
    a.descr = "<i4";
    CHECK(a.elements() == 1);
    a.shape = {2, 3, 4};
    CHECK(a.elements() == 24);
    CHECK(a.item_size() == 4);
    a.descr = "<c8";
    CHECK_THROWS_AS(a.item_size(), NpyError);
  }
}

TEST_SUITE("npy.parse.errors") {
  const std::string kData2 = f32(0x3FC00000) + f32(0xC0000000);

  TEST_CASE("bad magic") {
    std::string b = v1(f4_header("(2,)"), kData2);
    b[1] = 'n';
    CHECK_NPY_ERROR(b, "bad magic");
    CHECK_NPY_ERROR(std::string("PK\x03\x04", 4), "bad magic");
    CHECK_NPY_ERROR(std::string(), "bad magic");
  }

  TEST_CASE("unsupported version") {
    std::string b = v1(f4_header("(2,)"), kData2);
    b[6] = 4;
    CHECK_NPY_ERROR(b, "unsupported .npy format version 4.0");
    b[6] = 1;
    b[7] = 1;
    CHECK_NPY_ERROR(b, "unsupported .npy format version 1.1");
  }

  TEST_CASE("file ends inside the preamble") {
    CHECK_NPY_ERROR(kMagic + "\x01", "truncated");
    CHECK_NPY_ERROR(kMagic + std::string("\x01\x00\x10", 3), "truncated");
    CHECK_NPY_ERROR(kMagic + std::string("\x02\x00\x10\x00\x00", 5), "truncated");
  }

  TEST_CASE("header length beyond the file") {
    const std::string h = f4_header("(2,)");
    std::string b =
        kMagic + std::string("\x01\x00", 2) + le(h.size() + kData2.size() + 1, 2) + h + kData2;
    CHECK_NPY_ERROR(b, "header length");
    CHECK_NPY_ERROR(kMagic + std::string("\x02\x00", 2) + le(0xffffffffu, 4) + h, "header length");
  }

  TEST_CASE("malformed dict: missing key") {
    CHECK_NPY_ERROR(v1("{'descr': '<f4', 'shape': (2,), }", kData2), "missing key 'fortran_order'");
    CHECK_NPY_ERROR(v1("{'descr': '<f4', 'fortran_order': False}", kData2), "missing key 'shape'");
    CHECK_NPY_ERROR(v1("{}", kData2), "missing key 'descr'");
  }

  TEST_CASE("malformed dict: unknown or duplicate key") {
    CHECK_NPY_ERROR(
        v1("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'extra': 1}", kData2),
        "unexpected key 'extra'");
    CHECK_NPY_ERROR(
        v1("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'shape': (2,)}", kData2),
        "duplicate key 'shape'");
  }

  TEST_CASE("malformed dict: bad tuple") {
    const char* bad[] = {
        "(2,,)",
        "(,)",
        "(2 3)",
        "(2,",
        "(-2,)",
        "(2.0,)",
        "(a,)",
        "(02,)",
        "(2, 3]",
        "(99999999999999999999,)",
        "(4611686018427387905,)",
    };
    for (const char* shape : bad) {
      CAPTURE(shape);
      CHECK_NPY_ERROR(v1(f4_header(shape), kData2), "malformed header");
    }
    // (2) is the integer 2 in Python, not a tuple.
    CHECK_NPY_ERROR(v1(f4_header("(2)"), kData2), "'shape' must be a tuple");
    CHECK_NPY_ERROR(v1(f4_header("2"), kData2), "'shape' must be a tuple");
    CHECK_NPY_ERROR(v1(f4_header("[2]"), kData2), "malformed header");
  }

  TEST_CASE("malformed dict: unterminated string") {
    CHECK_NPY_ERROR(v1("{'descr': '<f4, 'fortran_order': False, 'shape': (2,), }", kData2),
                    "malformed header");
    CHECK_NPY_ERROR(v1("{'descr': '<f4", kData2), "unterminated string");
    CHECK_NPY_ERROR(v1("{'descr\n': '<f4', 'fortran_order': False, 'shape': (2,), }", kData2),
                    "unterminated string");
  }

  TEST_CASE("malformed dict: other syntax errors") {
    CHECK_NPY_ERROR(v1("", kData2), "expected '{'");
    CHECK_NPY_ERROR(v1("'descr': '<f4'", kData2), "expected '{'");
    CHECK_NPY_ERROR(v1("{'descr': '<f4', 'fortran_order': False, 'shape': (2,)", kData2),
                    "missing '}'");
    CHECK_NPY_ERROR(v1("{'descr' '<f4', 'fortran_order': False, 'shape': (2,)}", kData2),
                    "expected ':'");
    CHECK_NPY_ERROR(v1("{'descr': '<f4' 'fortran_order': False, 'shape': (2,)}", kData2),
                    "expected ',' or '}'");
    CHECK_NPY_ERROR(v1("{'descr': '<f4', 'fortran_order': false, 'shape': (2,)}", kData2),
                    "unsupported value 'false'");
    CHECK_NPY_ERROR(v1("{'descr': '<f4', 'fortran_order': False, 'shape': (2,)} x", kData2),
                    "after the closing '}'");
    CHECK_NPY_ERROR(v1("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (2,)}", kData2),
                    "structured dtypes");
    CHECK_NPY_ERROR(v1("{descr: '<f4', 'fortran_order': False, 'shape': (2,)}", kData2),
                    "expected a string key");
  }

  TEST_CASE("malformed dict: values of the wrong type") {
    CHECK_NPY_ERROR(v1("{'descr': 4, 'fortran_order': False, 'shape': (2,)}", kData2),
                    "'descr' must be a string");
    CHECK_NPY_ERROR(v1("{'descr': '<f4', 'fortran_order': 0, 'shape': (2,)}", kData2),
                    "'fortran_order' must be True or False");
    CHECK_NPY_ERROR(v1("{'descr': '<f4', 'fortran_order': False, 'shape': '2'}", kData2),
                    "'shape' must be a tuple");
  }

  TEST_CASE("big-endian dtype") {
    CHECK_NPY_ERROR(v1("{'descr': '>f4', 'fortran_order': False, 'shape': (2,), }", kData2),
                    "big-endian dtype '>f4' is not supported");
    CHECK_NPY_ERROR(v1("{'descr': '>i8', 'fortran_order': False, 'shape': (1,), }", kData2),
                    "big-endian");
  }

  TEST_CASE("native byte order is only accepted for 1-byte types") {
    CHECK_NPY_ERROR(v1("{'descr': '=f4', 'fortran_order': False, 'shape': (2,), }", kData2),
                    "'=f4'");
    CHECK_NPY_ERROR(v1("{'descr': '|f4', 'fortran_order': False, 'shape': (2,), }", kData2),
                    "unsupported dtype descr '|f4'");
  }

  TEST_CASE("unsupported descr") {
    for (const char* d : {"<c8", "<u4", "<i2", "<U3", "|O", "<f16", "f4", "", "<V8", "<V1"}) {
      CAPTURE(d);
      CHECK_NPY_ERROR(
          v1(std::string("{'descr': '") + d + "', 'fortran_order': False, 'shape': (2,), }",
             kData2),
          "unsupported dtype descr");
    }
  }

  TEST_CASE("fortran order") {
    CHECK_NPY_ERROR(v1("{'descr': '<f4', 'fortran_order': True, 'shape': (1, 2), }", kData2),
                    "Fortran-order arrays are not supported; save with np.ascontiguousarray");
  }

  TEST_CASE("truncated data") {
    CHECK_NPY_ERROR(v1(f4_header("(3,)"), kData2), "truncated: expected 12 bytes of data, found 8");
    CHECK_NPY_ERROR(v1(f4_header("()"), ""), "truncated: expected 4 bytes of data, found 0");
  }

  TEST_CASE("trailing data") {
    CHECK_NPY_ERROR(v1(f4_header("(1,)"), kData2), "trailing data: expected 4 bytes of data");
    CHECK_NPY_ERROR(v1(f4_header("(2,)"), kData2 + "\n"), "1 extra bytes");
  }

  TEST_CASE("oversized shapes are rejected without overflow") {
    CHECK_NPY_ERROR(v1(f4_header("(4611686018427387904, 4611686018427387904)"), kData2),
                    "too large");
    CHECK_NPY_ERROR(v1(f4_header("(4611686018427387904, 4)"), kData2), "too large");
    CHECK_NPY_ERROR(v1(f4_header("(1099511627776,)"), kData2), "too large");  // 2^40 * 4 bytes
    // Just under the cap parses far enough to complain about the data, not the size.
    CHECK_NPY_ERROR(v1("{'descr': '|u1', 'fortran_order': False, 'shape': (1099511627776,)}", ""),
                    "truncated: expected 1099511627776 bytes");
  }
}
