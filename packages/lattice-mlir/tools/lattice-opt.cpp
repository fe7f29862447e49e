//===- lattice-opt.cpp - MLIR driver with the lattice dialect -------------===//
//
// mlir-opt for lattice artifacts: parses, verifies and prints modules of the
// lattice and func dialects; `--lattice-verify-artifact` adds the SPEC §6
// artifact checks.  Exit status 0 on success, 1 on any diagnostic.
//
//===----------------------------------------------------------------------===//

#include "lattice/LatticeDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"

#include "llvm/ADT/StringRef.h"

#include <vector>

int main(int argc, char **argv) {
  // Lattice diagnostics name the rule and the source line; MLIR's default of
  // appending a generic-form dump of the failing op (for artifact rules, the
  // whole module) is off unless asked for on the command line.
  std::vector<char *> args(argv, argv + argc);
  static char quiet[] = "--mlir-print-op-on-diagnostic=false";
  bool explicitChoice = false;
  for (int i = 1; i < argc; ++i)
    explicitChoice |= llvm::StringRef(argv[i]).starts_with("--mlir-print-op-on-diagnostic") ||
                      llvm::StringRef(argv[i]).starts_with("-mlir-print-op-on-diagnostic");
  if (!explicitChoice)
    args.insert(args.begin() + 1, quiet);
  argc = static_cast<int>(args.size());
  argv = args.data();

  mlir::DialectRegistry registry;
  registry.insert<mlir::lattice::LatticeDialect, mlir::func::FuncDialect>();
  mlir::lattice::registerLatticePasses();
  return mlir::asMainReturnCode(mlir::MlirOptMain(
      argc, argv, "lattice-opt: parse, verify and print lattice MLIR artifacts\n", registry));
}
