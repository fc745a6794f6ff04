// Whole-file reads. Pure I/O, no parsing; any thread.
#pragma once

#include <optional>
#include <string>

namespace gpuman {

/// The file's bytes, read with open/read (one read for a small file; /proc files, which
/// report size 0, are read until end of file). nullopt when it cannot be opened or read
/// (a directory included). A stream (std::ifstream + rdbuf) cost several times as much
/// per byte: start-up reads the scenario and /proc this way (docs/design.md, "Start-up").
std::optional<std::string> ReadWholeFile(const std::string& path);

}  // namespace gpuman
