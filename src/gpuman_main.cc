// gpuman's entry point: everything lives in cli/; this file only hands over argv/envp.
#include "cli/app.h"

int main(int argc, char** argv) { return gpuman::cli::Main(argc, argv); }
