// The format's SHA-256 against the FIPS 180-2 appendix test vectors (published digests), fed
// whole and a byte at a time, and on a file.
#include <doctest/doctest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "opforge/sha256.h"

namespace opforge::registry {
namespace {

TEST_CASE("sha256: FIPS 180-2 test vectors") {
  CHECK(sha256_hex("") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  CHECK(sha256_hex("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  CHECK(sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq") ==
        "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  CHECK(sha256_hex(std::string(1000000, 'a')) ==
        "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST_CASE("sha256: any split of the input gives the same digest; a file's digest is its bytes'") {
  std::string text;
  for (int i = 0; i < 1000; ++i) text += static_cast<char>(i * 7 + 3);
  for (size_t step : {size_t(1), size_t(3), size_t(63), size_t(64), size_t(65), size_t(999)}) {
    CAPTURE(step);
    Sha256 h;
    for (size_t at = 0; at < text.size(); at += step)
      h.update(text.data() + at, std::min(step, text.size() - at));
    CHECK(h.hex_digest() == sha256_hex(text));
  }
  char tmpl[] = "/tmp/opforge-sha-XXXXXX";
  const std::filesystem::path dir = mkdtemp(tmpl);
  std::ofstream(dir / "f", std::ios::binary) << text;
  CHECK(sha256_file_hex((dir / "f").string()) == sha256_hex(text));
  CHECK_THROWS_WITH_AS(sha256_file_hex((dir / "missing").string()),
                       doctest::Contains("cannot open: No such file or directory"),
                       std::runtime_error);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace opforge::registry
