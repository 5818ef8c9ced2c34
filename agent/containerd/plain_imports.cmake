# Copies proto IN to OUT with `import weak "x";` turned into `import "x";` (see CMakeLists.txt).
file(READ ${IN} text)
string(REPLACE "import weak " "import " text "${text}")
file(WRITE ${OUT} "${text}")
