// Runs a fuzz target's LLVMFuzzerTestOneInput over files, as libFuzzer would replay them:
// `fuzz_replay_TARGET DIR_OR_FILE...`. The normal (gcc) suite runs every target over its
// committed corpus, tests/fuzz/corpus/TARGET/ (ctest label `fuzz`), so each crasher found
// stays a regression test. Fails when a path holds no file at all, so an emptied or
// misplaced corpus cannot pass by checking nothing.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

int main(int argc, char** argv) {
  namespace fs = std::filesystem;
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s DIR_OR_FILE...\n", argv[0]);
    return 2;
  }
  for (int a = 1; a < argc; ++a) {
    std::vector<fs::path> files;
    std::error_code ec;
    if (fs::is_directory(argv[a], ec)) {
      for (const auto& entry : fs::directory_iterator(argv[a])) {
        if (entry.is_regular_file()) files.push_back(entry.path());
      }
    } else if (fs::is_regular_file(argv[a], ec)) {
      files.push_back(argv[a]);
    }
    if (files.empty()) {
      std::fprintf(stderr, "%s: no input files\n", argv[a]);
      return 1;
    }
    std::sort(files.begin(), files.end());
    for (const fs::path& file : files) {
      std::ifstream in(file, std::ios::binary);
      std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      if (!in.good() && !in.eof()) {
        std::fprintf(stderr, "%s: cannot read\n", file.c_str());
        return 1;
      }
      std::fprintf(stderr, "running %s (%zu bytes)\n", file.c_str(), bytes.size());
      LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
    }
    std::printf("%s: %zu inputs ran\n", argv[a], files.size());
  }
  return 0;
}
