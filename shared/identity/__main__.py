"""`python -m shared.identity new-key OWNER` prints a new API key and its A2A_API_KEYS entry;
`python -m shared.identity hash-key OWNER` reads a key from stdin and prints its entry."""

from __future__ import annotations

import argparse
import sys

from shared.identity.api_key import MIN_KEY_LENGTH, hashed, new_key


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m shared.identity", description=__doc__)
    parser.add_argument("command", choices=("new-key", "hash-key"))
    parser.add_argument("owner", help="the owner the key's caller acts as (no comma, no colon)")
    args = parser.parse_args(argv)
    if not args.owner or set(args.owner) & {",", ":"} or args.owner != args.owner.strip():
        parser.error("OWNER must be non-empty, without commas, colons or surrounding spaces")
    if args.command == "new-key":
        key = new_key()
        print(f"key (give it to the caller, keep it nowhere else): {key}", file=sys.stderr)
    else:
        key = sys.stdin.readline().strip()
        if len(key) < MIN_KEY_LENGTH:
            parser.error(f"the key must have at least {MIN_KEY_LENGTH} characters (use new-key)")
    print(f"{args.owner}:{hashed(key)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
