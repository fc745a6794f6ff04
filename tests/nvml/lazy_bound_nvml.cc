// A test library with NVML's required entry points, one of whose other functions calls a
// symbol that nothing defines. NvmlLibrary::Load binds symbols on first call (RTLD_LAZY),
// so this loads and works as long as nobody calls nvmlDeviceGetName; a loader that binds
// everything at load (RTLD_NOW) refuses the whole file. tests/nvml/library_test.cc.
extern "C" {
void gpuman_test_symbol_that_nothing_defines();

__attribute__((visibility("default"))) int nvmlInit_v2() { return 0; }
__attribute__((visibility("default"))) int nvmlShutdown() { return 0; }
__attribute__((visibility("default"))) const char* nvmlErrorString(int) { return "Unknown Error"; }
__attribute__((visibility("default"))) int nvmlDeviceGetCount_v2(unsigned* count) {
  *count = 0;
  return 0;
}
__attribute__((visibility("default"))) int nvmlDeviceGetHandleByIndex_v2(unsigned, void**) { return 2; }
__attribute__((visibility("default"))) int nvmlDeviceGetName(void*, char*, unsigned) {
  gpuman_test_symbol_that_nothing_defines();
  return 0;
}
}
