//===- ErrorAssertions.h - GoogleTest assertions on llvm::Error -----------===//
#ifndef ZINC_TEST_UNIT_CUDA_ERRORASSERTIONS_H
#define ZINC_TEST_UNIT_CUDA_ERRORASSERTIONS_H

#include "llvm/Support/Error.h"
#include "gtest/gtest.h"

/// Fails the test with the error's message when `expr` is an error.
#define ASSERT_NO_ERROR(expr)                                                  \
  do {                                                                         \
    if (llvm::Error assertErr = (expr))                                        \
      FAIL() << llvm::toString(std::move(assertErr));                          \
  } while (false)

/// Declares `var` as the value of an llvm::Expected, failing the test on
/// an error.
#define ASSIGN_OR_FAIL(var, expr)                                              \
  auto var##OrErr = (expr);                                                    \
  ASSERT_TRUE(static_cast<bool>(var##OrErr))                                   \
      << llvm::toString(var##OrErr.takeError());                               \
  auto &var = *var##OrErr

#endif
