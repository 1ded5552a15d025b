"""Schemathesis hooks for run-schemathesis.sh: the credentials each kind of route needs.

Loaded through SCHEMATHESIS_HOOKS by the script, which sets the environment read here:
  PUSHGATE_CONFORMANCE_KEY   the provider's .p8 (P-256), configured on the gateway with --provider-key
  PUSHGATE_CONFORMANCE_TEAM  its team id (the JWT's iss)
  PUSHGATE_CONFORMANCE_KID   its key id (the JWT's kid)

- Provider routes (/3/...): an ES256 JWT (PyJWT) minted at start and kept for 50 minutes: a
  token lasts an hour, and a connection that switches tokens within 20 minutes is refused
  (TooManyProviderTokenUpdates).
- Device routes (/v1/devices/{deviceId}/...): the secret that POST /v1/devices returned with that
  device id. The OpenAPI links carry the device id from step to step (an authorization header is
  not a parameter a link can set); a device id nobody created gets no secret, so its requests are
  answered 401, as the spec says.
- Operator routes: none; the gateway has no admin token and sees nghttpx's loopback address.

And one check, `state_dependent_refusals` (see STATE_DEPENDENT_400).
"""

import os
import threading
import time

import jwt
import schemathesis

_secrets: dict[str, str] = {}
_lock = threading.Lock()


@schemathesis.hook
def after_call(context, case, response):
    if case.operation.path == "/v1/devices" and case.method.upper() == "POST" and response.status_code == 201:
        created = response.json()
        with _lock:
            _secrets[created["deviceId"]] = created["secret"]


# Minted again after 50 minutes (a token is refused after 60), never sooner: each new token on a
# connection is a switch, and two switches within 20 minutes are refused.
@schemathesis.auth(refresh_interval=3000, retry_on=[]).apply_to(path_regex="^/3/")
class ProviderToken:
    def get(self, case, context):
        with open(os.environ["PUSHGATE_CONFORMANCE_KEY"], "rb") as key:
            private_key = key.read()
        return jwt.encode(
            {"iss": os.environ["PUSHGATE_CONFORMANCE_TEAM"], "iat": int(time.time())},
            private_key,
            algorithm="ES256",
            headers={"kid": os.environ["PUSHGATE_CONFORMANCE_KID"]},
        )

    def set(self, case, data, context):
        case.headers = case.headers or {}
        case.headers["authorization"] = f"bearer {data}"


# No caching (refresh_interval=None): `get` is asked for every request, and the table grows.
@schemathesis.auth(refresh_interval=None, retry_on=[]).apply_to(path_regex="^/v1/devices/")
class DeviceSecret:
    def get(self, case, context):
        return _secrets

    def set(self, case, data, context):
        with _lock:
            secret = data.get(str((case.path_parameters or {}).get("deviceId")))
        if secret is not None:
            case.headers = case.headers or {}
            case.headers["authorization"] = f"bearer {secret}"


# Refusals of schema-valid requests that depend on state or on two parts of a request together,
# which a schema cannot express (openapi.yaml says each): an unknown or unregistered token, a
# token of another app, a topic the provider key does not cover, a push type that neither the
# header, the topic nor `aps` gives, a push type whose topic suffix, payload or priority does not
# fit it; a state report for an app the device has not registered; a
# fetch result for a seq that has no open window; a Web Push body without its Content-Encoding;
# an application server key off the curve.
# schemathesis.toml lets these operations answer
# a schema-valid request with 400 (positive_data_acceptance), and this check narrows that 400 to
# these reasons: any other 400 to a schema-valid request still fails the run.
STATE_DEPENDENT_400 = {
    # reason: the detail must contain one of these, or anything when None
    "POST /3/device/{deviceToken}": {
        "BadDeviceToken": None,
        "DeviceTokenNotForTopic": None,
        "TopicDisallowed": None,
        "BadPayload": ("cannot infer the push type", "a background push"),
        "BadTopic": ("needs apns-topic", "the suffix of"),
        "BadPriority": ("background pushes must use apns-priority 5 or 1",),
    },
    "PUT /v1/devices/{deviceId}/state": {"BadTopic": ("is not registered on this device",)},
    # A body needs Content-Encoding: aes128gcm, an empty one does not: two parts of a request.
    "POST /webpush/{token}": {"BadContentEncoding": None},
    # A key of the right form whose point is not on P-256 (what a pattern cannot say).
    "POST /v1/devices/{deviceId}/subscriptions": {"BadRequest": ("must be a P-256 public key",)},
    "POST /v1/devices/{deviceId}/fetch-results": {"BadFetchResult": None},
}


@schemathesis.check
def state_dependent_refusals(ctx, response, case):
    allowed = STATE_DEPENDENT_400.get(case.operation.label)
    if allowed is None or response.status_code != 400 or case.meta is None:
        return None
    if not case.meta.generation.mode.is_positive:
        return None
    body = response.json()
    reason, detail = body.get("reason"), body.get("detail", "")
    if reason not in allowed or (allowed[reason] is not None and not any(part in detail for part in allowed[reason])):
        raise AssertionError(
            f"a schema-valid request was refused with 400 {reason} ({detail}); "
            f"only {', '.join(allowed)} may refuse it here, for the state or header it depends on"
        )
    return None
