//===- lattice-opt.cpp - MLIR driver with the lattice dialect -------------===//
//
// mlir-opt for lattice artifacts: parses, verifies and prints modules of the
// lattice and func dialects; `--lattice-verify-artifact` adds the artifact
// checks.  Exit status 0 on success, 1 on any diagnostic.
//
//  * The input may be a bundle directory (model.lattice/): its graph.mlir is
//    verified as an artifact, and a bundle without weights.safetensors is
//    refused.
//  * `--help` lists the lattice options first, then LLVM's usual list;
//    `--help-hidden` keeps LLVM's full one.  `--version` prints the
//    project's version (the lattice-mlir distribution's, fixed at build
//    time).
//  * The input goes through the same lexical pre-check as the in-process
//    API before MLIR parses it (see lib/LatticePrecheck.cpp), and the whole
//    driver runs on a thread with the parser's large stack.
//
//===----------------------------------------------------------------------===//

#include "lattice/LatticeDialect.h"
#include "lattice/LatticePrecheck.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Support/thread.h"

#include <string>
#include <vector>

#ifndef LATTICE_VERSION
#define LATTICE_VERSION "0+unknown"
#endif

namespace {

constexpr const char *kVerifyArtifact = "--lattice-verify-artifact";

void printLatticeHelp(llvm::raw_ostream &os) {
  os << "lattice-opt " LATTICE_VERSION ": parse, verify and print lattice MLIR artifacts\n\n"
        "USAGE: lattice-opt [options] <graph.mlir | bundle directory | ->\n\n"
        "LATTICE OPTIONS:\n"
        "  <bundle directory>           verify DIR/graph.mlir as an artifact (implies\n"
        "                               --lattice-verify-artifact); DIR must also hold\n"
        "                               weights.safetensors\n"
        "  --lattice-verify-artifact    apply the artifact rules (IR version, schema digest,\n"
        "                               weight file, @forward and its ABI metadata)\n"
        "  --split-input-file           verify each '// -----' chunk as its own module\n"
        "  -o <file>                    write the printed module to <file> (default stdout)\n"
        "  --mlir-print-op-generic      print in MLIR's generic op form\n"
        "  --version                    print the Lattice version\n"
        "  --help-hidden                every MLIR and LLVM option\n\n"
        "Parser limits (each refused with a diagnostic at its line:col): "
     << (mlir::lattice::limits::kMaxInputBytes >> 20) << " MiB of text, "
     << mlir::lattice::limits::kMaxNesting << " nested brackets, "
     << mlir::lattice::limits::kMaxNumberChars << "-character numbers, "
     << mlir::lattice::limits::kMaxIdentifierChars << "-character identifiers, "
     << (mlir::lattice::limits::kMaxStringBytes >> 10) << " KiB strings.\n\n";
}

/// Rewrites a bundle-directory input to its graph.mlir (adding
/// --lattice-verify-artifact); false, with a message, for a directory that
/// is not a bundle.
bool resolveBundleInput(std::vector<std::string> &args) {
  for (size_t i = 1; i < args.size(); ++i) {
    llvm::StringRef arg = args[i];
    if (arg == "-o") {
      ++i; // its value
      continue;
    }
    if (arg.starts_with("-") || !llvm::sys::fs::is_directory(arg))
      continue;
    llvm::SmallString<256> graph(arg), weights(arg);
    llvm::sys::path::append(graph, "graph.mlir");
    llvm::sys::path::append(weights, "weights.safetensors");
    if (!llvm::sys::fs::is_regular_file(graph)) {
      llvm::errs() << "lattice-opt: " << arg
                   << " is a directory without graph.mlir; pass a bundle directory "
                      "(model.lattice/ with graph.mlir and weights.safetensors) or a "
                      "graph.mlir file\n";
      return false;
    }
    if (!llvm::sys::fs::is_regular_file(weights)) {
      llvm::errs() << "lattice-opt: bundle " << arg
                   << " has graph.mlir but no weights.safetensors; an artifact is both "
                      "files (re-export it, or pass graph.mlir alone to check only the graph)\n";
      return false;
    }
    args[i] = std::string(graph);
    bool verifying = false;
    for (const std::string &other : args)
      verifying |= other == kVerifyArtifact || other == "-lattice-verify-artifact";
    if (!verifying)
      args.push_back(kVerifyArtifact);
    return true;
  }
  return true;
}

int runDriver(std::vector<std::string> argStrings) {
  for (const std::string &arg : argStrings) {
    if (arg == "--version" || arg == "-version") {
      llvm::outs() << "lattice-opt " LATTICE_VERSION "\n";
      return 0;
    }
    if (arg == "--help" || arg == "-help" || arg == "-h" || arg == "--help-list") {
      printLatticeHelp(llvm::outs());
      llvm::outs() << "MLIR AND LLVM OPTIONS (all of them: --help-hidden):\n\n";
      llvm::outs().flush();
    }
  }
  if (!resolveBundleInput(argStrings))
    return 1;

  // Lattice diagnostics name the rule and the source line; MLIR's default of
  // appending a generic-form dump of the failing op (for artifact rules, the
  // whole module) is off unless asked for on the command line.
  bool explicitChoice = false;
  for (const std::string &arg : argStrings)
    explicitChoice |= llvm::StringRef(arg).contains("mlir-print-op-on-diagnostic");
  if (!explicitChoice)
    argStrings.insert(argStrings.begin() + 1, "--mlir-print-op-on-diagnostic=false");
  std::vector<char *> args;
  for (std::string &arg : argStrings)
    args.push_back(arg.data());
  args.push_back(nullptr);
  int argc = static_cast<int>(args.size()) - 1;

  mlir::DialectRegistry registry;
  registry.insert<mlir::lattice::LatticeDialect, mlir::func::FuncDialect>();
  mlir::lattice::registerLatticePasses();
  auto [inputFilename, outputFilename] = mlir::registerAndParseCLIOptions(
      argc, args.data(), "lattice-opt: parse, verify and print lattice MLIR artifacts\n", registry);

  mlir::MlirOptMainConfig config = mlir::MlirOptMainConfig::createFromCLOptions();
  if (config.shouldShowDialects())
    return mlir::asMainReturnCode(
        mlir::MlirOptMain(argc, args.data(), inputFilename, outputFilename, registry));

  std::string error;
  std::unique_ptr<llvm::MemoryBuffer> input = mlir::openInputFile(inputFilename, &error);
  if (!input) {
    llvm::errs() << error << "\n";
    return 1;
  }
  if (std::optional<mlir::lattice::PrecheckFailure> refused =
          mlir::lattice::precheck(input->getBuffer(), config.inputSplitMarker())) {
    llvm::SourceMgr sourceMgr;
    llvm::StringRef text = input->getBuffer();
    sourceMgr.AddNewSourceBuffer(std::move(input), llvm::SMLoc());
    sourceMgr.PrintMessage(llvm::errs(), llvm::SMLoc::getFromPointer(text.data() + refused->offset),
                           llvm::SourceMgr::DK_Error, refused->message);
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

} // namespace

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  std::vector<std::string> args(argv, argv + argc);
  int status = 1;
  llvm::thread driver(std::optional<unsigned>(mlir::lattice::limits::kParserStackBytes),
                      [&] { status = runDriver(std::move(args)); });
  driver.join();
  return status;
}
