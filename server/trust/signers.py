"""Who signed a message: verification against a local key file or the sender's agent card.

A signed message (see `a2a_grpc.core.signing`) whose header names a card (`a2a-card`) is verified
with the keys that card publishes, when the operator trusts that card (`serve
--trusted-signer-cards`); a message naming no card, or any message when no card is trusted, is
verified with the local key file (`serve --signature-keys`). Contract of `SignerCards.keys`:
- only the trusted card URLs are ever fetched: a finite set the operator chose, so a message
  cannot make the server fetch anything else, and the cache stays bounded;
- a card is cached as `a2a_grpc.core.cards.CardCache` says (max-age, ETag), each fetch bounded
  by the timeout;
- a key id the cached card does not list makes one revalidating fetch (how a rotated key is
  picked up without a restart), at most once per card every `refresh_interval` seconds, so
  made-up key ids cannot make the server hammer a card;
- a card that cannot be fetched (timeout, connection, HTTP 5xx) fails every message naming it for
  `refresh_interval` seconds without another fetch (`SignerCardUnavailableError`);
- anything else wrong (an untrusted card, HTTP 4xx, a malformed card, no keys on it, a card
  signature that does not verify with `--signer-card-keys`, an unknown key id) is a
  SignatureError: the message is refused.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable

import httpx

from a2a_grpc.core.cards import (
    CardCache,
    CardFetchError,
    CardRejectedError,
    FetchedCard,
    card_url,
)
from a2a_grpc.core.errors import InvalidAgentResponseError
from a2a_grpc.core.jose import KeySet, SignatureError
from a2a_grpc.core.signing import (
    SIGNED_MESSAGE_EXTENSION,
    MissingSignatureError,
    Signer,
    card_signing_keys,
    claimed_signer,
    message_signature,
    verify_message,
)
from a2a_grpc.generated import a2a_pb2

DEFAULT_SIGNER_CARD_TIMEOUT_S = 5.0
"""Seconds one fetch of a signer's card may take (`serve --signer-card-timeout`)."""
REFRESH_INTERVAL_S = 10.0
"""Least seconds between two fetches of one card forced by unknown key ids, and how long a
failed fetch is remembered."""


class SignerCardUnavailableError(Exception):
    """The signer's card cannot be fetched now; `retry_after`: seconds until it is tried again."""

    def __init__(self, message: str, retry_after: float) -> None:
        self.retry_after = retry_after
        super().__init__(message)


class SignerCards:
    """The trusted signers' cards and the message-signing keys they publish (module docstring).

    `trusted`: card URLs or origins (an origin stands for its well-known card URL); ValueError
    for one that is neither. `card_keys`: when given, every signer card must carry a signature
    that verifies with one of these keys.
    """

    def __init__(
        self,
        trusted: Iterable[str],
        *,
        timeout_s: float = DEFAULT_SIGNER_CARD_TIMEOUT_S,
        card_keys: KeySet | None = None,
        refresh_interval: float = REFRESH_INTERVAL_S,
        http: httpx.AsyncClient | None = None,
        clock: Callable[[], float] | None = None,
    ) -> None:
        self.trusted = tuple(dict.fromkeys(card_url(entry) for entry in trusted))
        self._clock = clock or time.monotonic
        self._refresh_interval = refresh_interval
        if http is None:
            # Never from the environment: a proxy would fetch on our behalf, elsewhere.
            http = httpx.AsyncClient(timeout=timeout_s, trust_env=False, follow_redirects=False)
            self._owns_http = True
        else:
            self._owns_http = False
        self._http = http
        self._cache = CardCache(http, timeout_s=timeout_s, clock=self._clock, keyset=card_keys)
        self._keysets: dict[str, tuple[FetchedCard, KeySet]] = {}
        self._refreshed: dict[str, float] = {}
        self._failed: dict[str, tuple[float, str]] = {}

    async def keys(self, claimed_card: str, kid: str) -> tuple[a2a_pb2.AgentCard, KeySet]:
        """The card a message names and the keys it publishes, holding `kid` unless refused."""
        try:
            url = card_url(claimed_card)
        except ValueError as error:
            raise SignatureError(
                f"the signer card {claimed_card!r} is not usable: {error}"
            ) from None
        if url not in self.trusted:
            raise SignatureError(
                f"untrusted signer card {url}: this server verifies signatures against the cards "
                f"{', '.join(self.trusted)} only (serve --trusted-signer-cards)"
            )
        now = self._clock()
        failed = self._failed.get(url)
        if failed is not None and now < failed[0]:
            raise SignerCardUnavailableError(failed[1], failed[0] - now)
        fetched, keys = await self._load(url, revalidate=False)
        if kid not in keys:
            last = self._refreshed.get(url)
            if last is None or now - last >= self._refresh_interval:
                self._refreshed[url] = now
                # A failed revalidation refuses this message only: the card in the cache still
                # serves the keys it holds, so a made-up key id cannot lock out the card's
                # signers while its host is unreachable.
                fetched, keys = await self._load(url, revalidate=True, remember_failure=False)
        if kid not in keys:
            raise SignatureError(
                f"unknown key id {kid!r}: the signer card {url} publishes "
                f"{', '.join(sorted(keys)) or 'no key'} (a card is fetched again for an unknown "
                f"key id at most every {self._refresh_interval:g} s)"
            )
        return fetched.card, keys

    async def _load(
        self, url: str, *, revalidate: bool, remember_failure: bool = True
    ) -> tuple[FetchedCard, KeySet]:
        try:
            fetched = await self._cache.fetch(url, revalidate=revalidate)
        except CardRejectedError as error:
            if error.status is None or error.status < 500:
                raise SignatureError(f"the signer card cannot be used: {error}") from error
            raise self._unavailable(url, str(error), remember_failure) from error
        except CardFetchError as error:
            raise self._unavailable(url, str(error), remember_failure) from error
        except InvalidAgentResponseError as error:
            raise SignatureError(f"the signer card {url} is not usable: {error.message}") from error
        self._failed.pop(url, None)
        known = self._keysets.get(url)
        if known is not None and known[0].card is fetched.card:  # the same card (a 304 keeps it)
            return fetched, known[1]
        keys = card_signing_keys(fetched.card)
        self._keysets[url] = (fetched, keys)
        return fetched, keys

    def _unavailable(self, url: str, problem: str, remember: bool) -> SignerCardUnavailableError:
        """The error for a failed fetch of `url`; with `remember`, messages naming that card
        are refused with it until `refresh_interval` has passed (no fetch per message)."""
        if not remember:
            return SignerCardUnavailableError(
                f"cannot verify the signature: {problem} (fetching the signer's card again for "
                "a key id it did not publish)",
                self._refresh_interval,
            )
        message = (
            f"cannot verify the signature: {problem} (the signer's card is fetched again "
            f"{self._refresh_interval:g} s after this failure; until then messages naming it "
            "are refused)"
        )
        self._failed[url] = (self._clock() + self._refresh_interval, message)
        return SignerCardUnavailableError(message, self._refresh_interval)

    async def aclose(self) -> None:
        await self._cache.aclose()
        if self._owns_http:
            await self._http.aclose()


class MessageVerifier:
    """Checks the signature of each incoming message (see the module docstring for which keys).

    `verify` returns the verified Signer, or None for an unsigned message when signatures are
    optional; raises MissingSignatureError (unsigned, `required`), SignatureError (refused) or
    SignerCardUnavailableError.
    """

    def __init__(self, keys: KeySet | None, cards: SignerCards | None, *, required: bool) -> None:
        self.keys = keys
        self.cards = cards
        self.required = required

    async def verify(self, message: a2a_pb2.Message, tenant: str) -> Signer | None:
        token = message_signature(message)
        if token is None:
            if not self.required:
                return None
            raise MissingSignatureError(
                f"message {message.message_id!r} is not signed "
                f'(no metadata["{SIGNED_MESSAGE_EXTENSION}"])'
            )
        kid, claimed_card = claimed_signer(token)
        if claimed_card and self.cards is not None:
            card, keys = await self.cards.keys(claimed_card, kid)
            verified = verify_message(message, keys, tenant=tenant)
            return Signer(verified.kid, card_url(claimed_card), card.name)
        if self.keys is None:
            raise SignatureError(
                "the signature names no signer card (a2a-card header) and this server has no "
                "key file to verify it with: sign naming your agent card"
            )
        return Signer(verify_message(message, self.keys, tenant=tenant).kid)

    async def aclose(self) -> None:
        if self.cards is not None:
            await self.cards.aclose()
