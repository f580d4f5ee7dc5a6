"""A stand-in for a recipe's entry module (see specs/recipes/README.md): not DAPO.

It has the module path tutorrl's dapo entry starts, so a bundle's launch can be
followed up to the import of the recipe's code; it trains nothing."""

import sys


def main(argv: list[str]) -> int:
    print("stand-in recipe.dapo.main_dapo: the layout of a recipe folder, not DAPO; "
          f"{len(argv)} override(s) received", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
