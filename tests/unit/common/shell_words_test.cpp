#include "common/spec/shell_words.h"

#include <catch2/catch.hpp>

using yard::spec::splitShellWords;
using Words = std::vector<std::string>;

TEST_CASE("strings split into words like a shell, no shell run", "[shell_words]") {
  CHECK(splitShellWords("ls -la").value() == Words{"ls", "-la"});
  CHECK(splitShellWords("  python3   train.py\t--epochs 3 ").value() ==
        Words{"python3", "train.py", "--epochs", "3"});
  CHECK(splitShellWords("sh -c 'echo started && sleep 1'").value() ==
        Words{"sh", "-c", "echo started && sleep 1"});
  CHECK(splitShellWords(R"(echo "a \"quoted\" $HOME" x)").value() ==
        Words{"echo", "a \"quoted\" $HOME", "x"});
  CHECK(splitShellWords(R"(a\ b c)").value() == Words{"a b", "c"});
  CHECK(splitShellWords("pre'fix'\"ed\"").value() == Words{"prefixed"});
  CHECK(splitShellWords("''").value() == Words{""});
  CHECK(splitShellWords("$HOME *.py ~").value() == Words{"$HOME", "*.py", "~"});
  CHECK(splitShellWords("").value().empty());
}

TEST_CASE("unterminated quotes are errors that say where", "[shell_words]") {
  auto r = splitShellWords("sh -c 'echo");
  REQUIRE_FALSE(r);
  CHECK(r.error() == "unterminated single quote at character 7");
  CHECK_FALSE(splitShellWords("echo \"abc"));
  CHECK_FALSE(splitShellWords("echo abc\\"));
}
