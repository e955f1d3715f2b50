// Kernel table selection: the best table the CPU runs by default, names and CEDAR_KERNELS honoured,
// unknown names and tables this CPU cannot run refused with a message.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "kernels/cpu.h"
#include "kernels/kernel_table.h"

namespace cedar {
namespace {

struct EnvGuard {  // sets CEDAR_KERNELS for one test, restores it after
  std::string saved;
  bool had;
  explicit EnvGuard(const char* v) {
    const char* old = std::getenv("CEDAR_KERNELS");
    had = old != nullptr;
    if (had) saved = old;
    if (v)
      setenv("CEDAR_KERNELS", v, 1);
    else
      unsetenv("CEDAR_KERNELS");
  }
  ~EnvGuard() {
    if (had)
      setenv("CEDAR_KERNELS", saved.c_str(), 1);
    else
      unsetenv("CEDAR_KERNELS");
  }
};

TEST(KernelSelect, DefaultIsTheBestSupportedTable) {
  EnvGuard env(nullptr);
  const auto tables = supported_kernel_tables();
  ASSERT_FALSE(tables.empty());
  EXPECT_EQ(tables.front()->name, "ref");
  EXPECT_EQ(&choose_kernels(), tables.back());
  EXPECT_EQ(&choose_kernels("auto"), tables.back());
  const CpuFeatures& f = cpu_features();
  for (const KernelTable* t : tables) {
    if (t->name == "avx2") {
      EXPECT_TRUE(f.has_avx2_fma());
    }
    if (t->name == "avx512") {
      EXPECT_TRUE(f.has_avx512());
    }
    if (t->name == "avx512bf16") {
      EXPECT_TRUE(f.has_avx512_bf16());
    }
  }
#if defined(__x86_64__)
  // a compiled-in table the CPU supports must be offered
  for (const std::string& n : kernel_table_names()) {
    const bool runs = n == "ref" || (n == "avx2" && f.has_avx2_fma()) ||
                      (n == "avx512" && f.has_avx512()) ||
                      (n == "avx512bf16" && f.has_avx512_bf16());
    bool offered = false;
    for (const KernelTable* t : tables) offered = offered || t->name == n;
    EXPECT_EQ(offered, runs) << n;
  }
#endif
}

TEST(KernelSelect, NamesAndTheEnvironmentOverride) {
  EnvGuard env(nullptr);
  EXPECT_EQ(choose_kernels("ref").name, "ref");
  try {
    choose_kernels("avx9000");
    FAIL() << "an unknown name was accepted";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("avx9000"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("ref"), std::string::npos);
  }
  {
    EnvGuard ref("ref");
    EXPECT_EQ(choose_kernels().name, "ref");
    EXPECT_EQ(choose_kernels(supported_kernel_tables().back()->name).name,
              supported_kernel_tables().back()->name);  // an explicit name wins over the env
  }
  {
    EnvGuard bad("nope");
    EXPECT_THROW(choose_kernels(), std::runtime_error);
  }
  // compiled in, but not runnable here: refused by name
  for (const std::string& n : kernel_table_names()) {
    bool offered = false;
    for (const KernelTable* t : supported_kernel_tables()) offered = offered || t->name == n;
    if (!offered) {
      EXPECT_THROW(choose_kernels(n), std::runtime_error) << n;
    }
  }
}

TEST(KernelSelect, DescribeNamesTheTableAndTheCpu) {
  const KernelTable& k = choose_kernels("ref");
  const std::string d = describe_kernels(k);
  EXPECT_EQ(d.rfind("kernels ref (cpu: ", 0), 0u) << d;
  EXPECT_NE(d.find(cpu_features().flags()), std::string::npos) << d;
}

}  // namespace
}  // namespace cedar
