// opforge runtime: NumPy .npy files, strict reader and atomic writer (format versions 1.0, 2.0,
// 3.0), for exchanging tensors with NumPy (the CLI's `opforge run` reads and writes them).
//
// Only what opforge exchanges: little-endian '<f2', '<f4', '<f8', '<i4', '<i8', '<u2' ('|u1'/
// '|b1' too), and '<V2' / '|V2': what np.save writes for ml_dtypes.bfloat16 arrays (bf16), C order
// (fortran_order True is rejected). Every malformed file is an NpyError whose message starts with
// the file name and says what is wrong.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace opforge::npy {

struct NpyError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct Array {
  std::string descr;           // e.g. "<f4"
  std::vector<int64_t> shape;  // () for a 0-d array
  std::vector<uint8_t> data;   // raw little-endian elements, C order
  int64_t elements() const;
  int item_size() const;  // from descr
};

Array read(const std::string& path);
Array parse(const std::string& bytes, const std::string& origin);  // origin names the source
std::string serialize(const Array& a);                             // version 1.0 (or 2.0 if needed)
// Writes to a temp file in the same directory, then renames over `path`.
void write_atomic(const std::string& path, const Array& a);

Array from_f32(const std::vector<float>& v, std::vector<int64_t> shape);
std::vector<float> to_f32(const Array& a, const std::string& origin);  // requires "<f4"

}  // namespace opforge::npy
