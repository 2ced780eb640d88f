// tests/main.cpp — the doctest runner for weft's suite; every other file in
// tests/ holds the cases of one component.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>
