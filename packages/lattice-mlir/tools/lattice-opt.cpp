//===- lattice-opt.cpp - MLIR driver with the lattice dialect -------------===//
//
// mlir-opt for lattice artifacts: parses, verifies and prints modules of the
// lattice and func dialects; `--lattice-verify-artifact` adds the SPEC §6
// artifact checks.  Exit status 0 on success, 1 on any diagnostic.
//
// The input goes through the same lexical forward-reference check as the
// in-process API before MLIR parses it (see lib/LatticePrecheck.cpp), so no
// text reaches the MLIR 19 parser bug that check exists for.
//
//===----------------------------------------------------------------------===//

#include "lattice/LatticeDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/raw_ostream.h"

#include <vector>

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);

  // Lattice diagnostics name the rule and the source line; MLIR's default of
  // appending a generic-form dump of the failing op (for artifact rules, the
  // whole module) is off unless asked for on the command line.
  std::vector<char *> args(argv, argv + argc);
  static char quiet[] = "--mlir-print-op-on-diagnostic=false";
  bool explicitChoice = false;
  for (int i = 1; i < argc; ++i)
    explicitChoice |= llvm::StringRef(argv[i]).contains("mlir-print-op-on-diagnostic");
  if (!explicitChoice)
    args.insert(args.begin() + 1, quiet);

  mlir::DialectRegistry registry;
  registry.insert<mlir::lattice::LatticeDialect, mlir::func::FuncDialect>();
  mlir::lattice::registerLatticePasses();
  auto [inputFilename, outputFilename] = mlir::registerAndParseCLIOptions(
      static_cast<int>(args.size()), args.data(),
      "lattice-opt: parse, verify and print lattice MLIR artifacts\n", registry);

  mlir::MlirOptMainConfig config = mlir::MlirOptMainConfig::createFromCLOptions();
  if (config.shouldShowDialects())
    return mlir::asMainReturnCode(mlir::MlirOptMain(static_cast<int>(args.size()), args.data(),
                                                    inputFilename, outputFilename, registry));

  std::string error;
  std::unique_ptr<llvm::MemoryBuffer> input = mlir::openInputFile(inputFilename, &error);
  if (!input) {
    llvm::errs() << error << "\n";
    return 1;
  }
  if (std::optional<mlir::lattice::ForwardReference> ref =
          mlir::lattice::findForwardReference(input->getBuffer())) {
    llvm::SourceMgr sourceMgr;
    llvm::StringRef text = input->getBuffer();
    sourceMgr.AddNewSourceBuffer(std::move(input), llvm::SMLoc());
    sourceMgr.PrintMessage(llvm::errs(), llvm::SMLoc::getFromPointer(text.data() + ref->offset),
                           llvm::SourceMgr::DK_Error,
                           mlir::lattice::describeForwardReference(*ref));
    return 1;
  }
  std::unique_ptr<llvm::ToolOutputFile> output = mlir::openOutputFile(outputFilename, &error);
  if (!output) {
    llvm::errs() << error << "\n";
    return 1;
  }
  if (mlir::failed(mlir::MlirOptMain(output->os(), std::move(input), registry, config)))
    return 1;
  output->keep();
  return 0;
}
