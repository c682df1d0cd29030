// GenGen's command line for the opforge generators, with errors (an unknown op, a bad attr)
// reported as a message and exit code 1 instead of an uncaught exception.
#include <Halide.h>

#include <iostream>

int main(int argc, char** argv) {
  try {
    return Halide::Internal::generate_filter_main(argc, argv, std::cerr);
  } catch (const std::exception& e) {
    std::cerr << "opforge_gen: error: " << e.what() << "\n";
    return 1;
  }
}
