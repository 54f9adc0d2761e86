// zinf: the command-line entry point. Everything happens in cli.cpp so tests can run it in-process.
#include <iostream>

#include "apps/zinf/cli.h"

int main(int argc, char** argv) {
  const zinf::cli::Io io = zinf::cli::process_io(std::cout, std::cerr);
  const int code = zinf::cli::run_cli(argc, argv, io);
  std::cout.flush();
  return code;
}
