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

int main(int argc, char **argv) {
  mlir::DialectRegistry registry;
  registry.insert<mlir::lattice::LatticeDialect, mlir::func::FuncDialect>();
  mlir::lattice::registerLatticePasses();
  return mlir::asMainReturnCode(mlir::MlirOptMain(
      argc, argv, "lattice-opt: parse, verify and print lattice MLIR artifacts\n", registry));
}
