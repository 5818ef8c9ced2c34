# Copies proto IN to OUT with `import weak "x";` turned into `import "x";` (see CMakeLists.txt),
# adding the gogo.proto import a file uses without declaring.
file(READ ${IN} text)
string(REPLACE "import weak " "import " text "${text}")
# cgroups' v2 metrics.proto uses gogoproto options without importing gogo.proto.
if(text MATCHES "\\(gogoproto\\." AND NOT text MATCHES "gogoproto/gogo.proto")
  string(REGEX REPLACE "(package [a-z0-9.]+;)" "\\1\nimport \"gogoproto/gogo.proto\";" text "${text}")
endif()
file(WRITE ${OUT} "${text}")
