"""API tokens: ``ap_`` + 43 URL-safe characters (32 random bytes). Only a SHA-256 of the token
is stored; 256 random bits leave nothing to guess, so a slow password hash would add latency to
every request and no security."""

import hashlib
import hmac
import secrets

TOKEN_PREFIX = "ap_"
_SECRET_BYTES = 32
# Characters of the token kept in clear to tell keys apart in listings (prefix + 8 random
# characters: 48 bits, useless for guessing the remaining 208).
DISPLAY_LENGTH = len(TOKEN_PREFIX) + 8


def new_token() -> str:
    return TOKEN_PREFIX + secrets.token_urlsafe(_SECRET_BYTES)


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


def display_prefix(token: str) -> str:
    return token[:DISPLAY_LENGTH]


def same_hash(left: str, right: str) -> bool:
    return hmac.compare_digest(left, right)
