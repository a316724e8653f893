// Reads the plugin's dynamic symbol table straight from the ELF file (what `nm -D
// --defined-only` prints) and checks that it defines exactly ncclNetPlugin_v8..v11, each
// with the size of its function table, and references no zcx_* symbol from outside.
#include <elf.h>
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <vector>

namespace {

struct DynSym {
  std::string name;
  bool defined;
  unsigned bind;
  uint64_t size;
};

bool read_dynsyms(const char* path, std::vector<DynSym>* out, std::string* why) {
  std::ifstream in(path, std::ios::binary);
  std::vector<char> f((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (f.size() < sizeof(Elf64_Ehdr) || memcmp(f.data(), ELFMAG, SELFMAG) != 0) {
    *why = "not an ELF file";
    return false;
  }
  Elf64_Ehdr eh;
  memcpy(&eh, f.data(), sizeof eh);
  if (eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_shoff + uint64_t{eh.e_shnum} * sizeof(Elf64_Shdr) > f.size()) {
    *why = "not a well-formed ELF64 file";
    return false;
  }
  std::vector<Elf64_Shdr> sh(eh.e_shnum);
  memcpy(sh.data(), f.data() + eh.e_shoff, sh.size() * sizeof(Elf64_Shdr));
  for (const Elf64_Shdr& s : sh) {
    if (s.sh_type != SHT_DYNSYM || s.sh_link >= sh.size()) continue;
    const Elf64_Shdr& strtab = sh[s.sh_link];
    for (uint64_t off = s.sh_offset; off + sizeof(Elf64_Sym) <= s.sh_offset + s.sh_size; off += sizeof(Elf64_Sym)) {
      Elf64_Sym sym;
      memcpy(&sym, f.data() + off, sizeof sym);
      if (sym.st_name == 0 || strtab.sh_offset + sym.st_name >= f.size()) continue;
      out->push_back(DynSym{f.data() + strtab.sh_offset + sym.st_name, sym.st_shndx != SHN_UNDEF,
                            ELF64_ST_BIND(sym.st_info), sym.st_size});
    }
    return true;
  }
  *why = "no .dynsym section";
  return false;
}

void expect_only_plugin_symbols(const char* path) {
  std::vector<DynSym> syms;
  std::string why;
  ASSERT_TRUE(read_dynsyms(path, &syms, &why)) << path << ": " << why;
  std::map<std::string, uint64_t> defined;
  for (const DynSym& s : syms) {
    if (s.defined && s.bind != STB_LOCAL) defined[s.name] = s.size;
    if (!s.defined) {
      EXPECT_NE(s.name.rfind("zcx", 0), 0u) << "undefined reference " << s.name;
    }
  }
  const std::map<std::string, uint64_t> expected = {
      {"ncclNetPlugin_v8", 152}, {"ncclNetPlugin_v9", 160}, {"ncclNetPlugin_v10", 160},
      {"ncclNetPlugin_v11", 176}};
  EXPECT_EQ(defined, expected) << path << " exports more or less than ncclNetPlugin_v8..v11";
}

TEST(PluginSymbols, RealPluginExportsOnlyTheVersionedTables) {
  expect_only_plugin_symbols(ZCX_PLUGIN_REAL_PATH);
}

TEST(PluginSymbols, TestBuildExportsOnlyTheVersionedTables) {
  expect_only_plugin_symbols(ZCX_PLUGIN_FAKE_PATH);
}

}  // namespace
