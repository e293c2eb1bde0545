#!/usr/bin/env python3
"""Writes v1.json, the flag evaluation vectors (README.md says how to run them).

The expectations below are written out by hand per operator, and rollout
results are computed here from this file's own position() — an
implementation independent of the Go evaluator, which runs the vectors in
flags/vectors_test.go. Run: python3 gen.py > v1.json
"""
import hashlib, json, sys

WHOLE = 100000

def position(salt, value):
    h = hashlib.sha256((salt + "." + value).encode("utf-8")).digest()
    return (int.from_bytes(h[:4], "big") * WHOLE) >> 32

def find(salt, want, prefix="u"):
    i = 0
    while True:
        v = "%s%d" % (prefix, i)
        if position(salt, v) == want:
            return v
        i += 1

def boolflag(rules=(), on=True, fall="off", **kw):
    f = {"type": "bool", "variants": {"on": True, "off": False}, "on": on,
         "offVariant": "off", "defaultVariant": "off", "salt": kw.pop("salt", "s"),
         "rules": list(rules)}
    if fall is not None:
        f["fallthrough"] = fall if isinstance(fall, dict) else {"variant": fall}
    f.update(kw)
    return f

def clause(attr, op, values, negate=False):
    c = {"attribute": attr, "op": op, "values": values}
    if negate:
        c["negate"] = True
    return c

def rule(clauses, serve="on", id=None):
    r = {"clauses": clauses}
    if id:
        r["id"] = id
    if isinstance(serve, dict):
        r.update(serve)
    else:
        r["variant"] = serve
    return r

BOOL = {True: True, False: False}
cases = []

def case(name, set_, flag, ctx, variant=None, value=None, reason=None, rule_=None, position_=None, type_=None, error=None):
    c = {"name": name, "set": set_, "flag": flag, "context": ctx}
    if type_:
        c["type"] = type_
    w = {"reason": reason}
    if error:
        w["errorCode"] = error
    else:
        w["variant"] = variant
        w["value"] = value
    if rule_ is not None:
        w["rule"] = rule_
    if position_ is not None:
        w["position"] = position_
    c["want"] = w
    cases.append(c)

# --- operators -----------------------------------------------------------
ops = {}
OPS = [
    ("in", ["NL", "BE"], [("NL", 1), ("BE", 1), ("DE", 0), ("nl", 0), ("", 0), (1, 0), (True, 0), ("NL ", 0)]),
    ("in", [1, 2.5, -3], [(1, 1), (1.0, 1), (2.5, 1), (-3, 1), (3, 0), ("1", 0), (False, 0), (0, 0)], "in-num"),
    ("in", [True], [(True, 1), (False, 0), ("true", 0), (1, 0)], "in-bool"),
    ("startsWith", ["user-", "admin-"], [("user-1", 1), ("admin-x", 1), ("user-", 1), ("usr-1", 0), ("User-1", 0), ("", 0), (5, 0), ("xuser-1", 0)]),
    ("endsWith", ["@example.com"], [("a@example.com", 1), ("@example.com", 1), ("a@example.org", 0), ("a@EXAMPLE.com", 0), (1, 0), ("example.com", 0)]),
    ("contains", ["beta", "héllo"], [("x-beta-y", 1), ("beta", 1), ("bet", 0), ("BETA", 0), (True, 0), ("say héllo!", 1), ("hello", 0)]),
    ("lt", [10], [(9, 1), (10, 0), (11, 0), (-1, 1), (9.99, 1), ("5", 0), (True, 0)]),
    ("le", [10], [(10, 1), (10.0001, 0), (9, 1), (10.0, 1), ("10", 0)]),
    ("gt", [10], [(11, 1), (10, 0), (10.5, 1), (-11, 0), ("11", 0)]),
    ("ge", [10], [(10, 1), (9.999, 0), (1e9, 1), (False, 0)]),
    ("lt", [0.5, 2], [(1, 1), (2, 0), (0.4, 1)], "lt-multi"),
    ("semverEq", ["1.2.3"], [("1.2.3", 1), ("v1.2.3", 1), ("1.2.3+build.5", 1), ("1.2.3-rc.1", 0), ("1.2.4", 0), ("1.2", 0), ("01.2.3", 0), (123, 0), ("1.2.3.4", 0), ("", 0)]),
    ("semverLt", ["2.0.0"], [("1.9.9", 1), ("2.0.0-rc.1", 1), ("2.0.0", 0), ("10.0.0", 0), ("2.0.1", 0), ("1.10.0", 1), ("not-a-version", 0),
                              ("2.0.0-01", 0), ("2.0.0-rc.01", 0), ("2.0.0-0a", 1), ("2.0.0-0", 1), ("1.9.9+001", 1)]),
    ("semverLt", ["1.0.0-beta.11"], [("1.0.0-beta.2", 1), ("1.0.0-beta.11", 0), ("1.0.0-rc.1", 0), ("1.0.0-beta", 1), ("1.0.0-alpha.beta", 1)], "semverLt-pre"),
    ("semverGt", ["1.0.0-alpha"], [("1.0.0-alpha.1", 1), ("1.0.0-beta", 1), ("1.0.0", 1), ("1.0.0-alpha", 0), ("0.9.0", 0), ("1.0.0-1", 0), ("1.0.0-alpha.beta", 1), ("1.0.0-alpha+b", 0)]),
]
for spec in OPS:
    op, values, tests = spec[0], spec[1], spec[2]
    key = spec[3] if len(spec) > 3 else op
    ops[key] = boolflag([rule([clause("a", op, values)], id=key)])
    for v, m in tests:
        case("%s %s" % (key, json.dumps(v, ensure_ascii=False)), "operators", key, {"a": v},
             "on" if m else "off", bool(m), "TARGETING_MATCH" if m else "DEFAULT", 0 if m else None)
    case("%s missing attribute" % key, "operators", key, {"b": values[0]}, "off", False, "DEFAULT")
    case("%s null attribute" % key, "operators", key, {"a": None}, "off", False, "DEFAULT")
# negate
ops["not-in"] = boolflag([rule([clause("a", "in", ["NL", "BE"], negate=True)])])
for v, m in [("DE", 1), ("NL", 0), ("BE", 0), (1, 1), ("", 1)]:
    case("not-in %s" % json.dumps(v), "operators", "not-in", {"a": v}, "on" if m else "off", bool(m),
         "TARGETING_MATCH" if m else "DEFAULT", 0 if m else None)
case("not-in missing attribute never matches", "operators", "not-in", {}, "off", False, "DEFAULT")
ops["not-semverLt"] = boolflag([rule([clause("app", "semverLt", ["2.0.0"], negate=True)])])
for v, m in [("2.0.0", 1), ("1.0.0", 0), ("garbage", 1)]:
    case("not-semverLt %s" % v, "operators", "not-semverLt", {"app": v}, "on" if m else "off", bool(m),
         "TARGETING_MATCH" if m else "DEFAULT", 0 if m else None)
case("not-semverLt missing", "operators", "not-semverLt", {}, "off", False, "DEFAULT")
# AND of clauses, first rule wins
ops["and"] = boolflag([rule([clause("country", "in", ["NL"]), clause("plan", "in", ["pro", "team"])])])
for ctx, m in [({"country": "NL", "plan": "pro"}, 1), ({"country": "NL", "plan": "team"}, 1), ({"country": "NL", "plan": "free"}, 0),
               ({"country": "DE", "plan": "pro"}, 0), ({"country": "NL"}, 0), ({"plan": "pro"}, 0)]:
    case("and %s" % json.dumps(ctx), "operators", "and", ctx, "on" if m else "off", bool(m), "TARGETING_MATCH" if m else "DEFAULT", 0 if m else None)
ops["order"] = {"type": "string", "variants": {"a": "A", "b": "B", "c": "C"}, "on": True, "offVariant": "c",
                "defaultVariant": "c", "salt": "order",
                "rules": [rule([clause("country", "in", ["NL"])], "a", "nl"), rule([clause("plan", "in", ["pro"])], "b", "pro")],
                "fallthrough": {"variant": "c"}}
for ctx, v, r in [({"country": "NL", "plan": "pro"}, "a", 0), ({"country": "DE", "plan": "pro"}, "b", 1),
                  ({"country": "DE", "plan": "free"}, "c", None), ({"country": "NL"}, "a", 0), ({}, "c", None)]:
    case("order %s" % json.dumps(ctx), "operators", "order", ctx, v, v.upper(), "TARGETING_MATCH" if r is not None else "DEFAULT", r)

# --- types, static, default, disabled, errors ---------------------------
types = {
    "static-bool": boolflag(fall="on"),
    "string": {"type": "string", "variants": {"red": "#f00", "blue": "#00f"}, "on": True, "offVariant": "red", "defaultVariant": "red", "salt": "string",
               "rules": [rule([clause("team", "in", ["design"])], "blue")], "fallthrough": {"variant": "red"}},
    "int": {"type": "int", "variants": {"small": 10, "big": 1000, "neg": -5}, "on": True, "offVariant": "neg", "defaultVariant": "small", "salt": "int",
            "rules": [rule([clause("tier", "ge", [3])], "big")]},
    "float": {"type": "float", "variants": {"low": 0.25, "high": 1.5, "whole": 2}, "on": True, "offVariant": "low", "defaultVariant": "low", "salt": "float",
              "rules": [rule([clause("load", "lt", [0.5])], "high")], "fallthrough": {"variant": "whole"}},
    "object": {"type": "object", "variants": {"v1": {"color": "red", "size": 3, "tags": ["a"]}, "v2": {"color": "blue", "nested": {"x": True}}},
               "on": True, "offVariant": "v1", "defaultVariant": "v1", "salt": "object", "fallthrough": {"variant": "v2"}},
    "off": boolflag([rule([clause("a", "in", ["x"])])], on=False, fall="on"),
    "off-string": {"type": "string", "variants": {"a": "A", "b": "B"}, "on": False, "offVariant": "b", "defaultVariant": "a", "salt": "off-string", "fallthrough": {"variant": "a"}},
    "no-fallthrough": boolflag([rule([clause("a", "in", ["x"])])], fall=None, defaultVariant="on"),
}
case("static bool", "types", "static-bool", {}, "on", True, "STATIC")
case("static bool ignores context", "types", "static-bool", {"targetingKey": "u", "a": 1}, "on", True, "STATIC")
case("string rule", "types", "string", {"team": "design"}, "blue", "#00f", "TARGETING_MATCH", 0)
case("string fallthrough", "types", "string", {"team": "ops"}, "red", "#f00", "DEFAULT")
case("int rule", "types", "int", {"tier": 3}, "big", 1000, "TARGETING_MATCH", 0)
case("int no fallthrough serves default variant", "types", "int", {"tier": 2}, "small", 10, "DEFAULT")
case("float rule", "types", "float", {"load": 0.1}, "high", 1.5, "TARGETING_MATCH", 0)
case("float fallthrough whole number", "types", "float", {"load": 0.9}, "whole", 2.0, "DEFAULT")
case("object", "types", "object", {}, "v2", {"color": "blue", "nested": {"x": True}}, "STATIC")
case("disabled ignores matching rule", "types", "off", {"a": "x"}, "off", False, "DISABLED")
case("disabled empty context", "types", "off", {}, "off", False, "DISABLED")
case("disabled string serves off variant", "types", "off-string", {}, "b", "B", "DISABLED")
case("no fallthrough, rule matches", "types", "no-fallthrough", {"a": "x"}, "on", True, "TARGETING_MATCH", 0)
case("no fallthrough, no match: default variant", "types", "no-fallthrough", {"a": "y"}, "on", True, "DEFAULT")
case("flag not found", "types", "nope", {}, reason="ERROR", error="FLAG_NOT_FOUND")
case("flag not found typed", "types", "nope", {}, reason="ERROR", error="FLAG_NOT_FOUND", type_="bool")
for key, typ, wrong in [("static-bool", "bool", "string"), ("string", "string", "bool"), ("int", "int", "float"), ("float", "float", "int"),
                        ("object", "object", "string"), ("static-bool", "bool", "object"), ("off", "bool", "int")]:
    case("type mismatch: %s flag read as %s" % (typ, wrong), "types", key, {}, reason="ERROR", error="TYPE_MISMATCH", type_=wrong)
case("typed read of right type", "types", "string", {"team": "design"}, "blue", "#00f", "TARGETING_MATCH", 0, type_="string")
case("typed read of object", "types", "object", {}, "v2", {"color": "blue", "nested": {"x": True}}, "STATIC", type_="object")
case("typed read of disabled", "types", "off", {}, "off", False, "DISABLED", type_="bool")

# --- prerequisites -------------------------------------------------------
pre = {
    "base": boolflag([rule([clause("country", "in", ["NL"])])]),
    "killed": boolflag(on=False, fall="on", offVariant="on"),
    "dep": boolflag(prerequisites=[{"flag": "base", "variant": "on"}], fall="on"),
    "dep-on-killed": boolflag(prerequisites=[{"flag": "killed", "variant": "on"}], fall="on"),
    "chain": boolflag(prerequisites=[{"flag": "dep", "variant": "on"}], fall="on"),
    "dep-off": boolflag(prerequisites=[{"flag": "base", "variant": "off"}], fall="on"),
    "two": boolflag([rule([clause("plan", "in", ["pro"])])], prerequisites=[{"flag": "base", "variant": "on"}, {"flag": "color", "variant": "blue"}]),
    "color": {"type": "string", "variants": {"red": "r", "blue": "b"}, "on": True, "offVariant": "red", "defaultVariant": "red", "salt": "color",
              "rules": [rule([clause("plan", "in", ["pro", "team"])], "blue")], "fallthrough": {"variant": "red"}},
    "off-with-failing-prereq": boolflag(on=False, prerequisites=[{"flag": "base", "variant": "on"}], fall="on"),
    "dep-split": boolflag(prerequisites=[{"flag": "split", "variant": "on"}], fall="on"),
    "split": boolflag(fall={"rollout": {"weights": [{"variant": "on", "weight": 50000}, {"variant": "off", "weight": 50000}]}}, salt="checkout-v2"),
}
case("prereq met", "prerequisites", "dep", {"country": "NL"}, "on", True, "DEFAULT")
case("prereq not met", "prerequisites", "dep", {"country": "DE"}, "off", False, "PREREQUISITE_FAILED")
case("prereq missing attribute", "prerequisites", "dep", {}, "off", False, "PREREQUISITE_FAILED")
case("prereq disabled even at the required variant", "prerequisites", "dep-on-killed", {}, "off", False, "PREREQUISITE_FAILED")
case("chain met", "prerequisites", "chain", {"country": "NL"}, "on", True, "DEFAULT")
case("chain fails transitively", "prerequisites", "chain", {"country": "BE"}, "off", False, "PREREQUISITE_FAILED")
case("prereq at off variant met", "prerequisites", "dep-off", {"country": "DE"}, "on", True, "DEFAULT")
case("prereq at off variant not met", "prerequisites", "dep-off", {"country": "NL"}, "off", False, "PREREQUISITE_FAILED")
case("two prereqs met, rule matches", "prerequisites", "two", {"country": "NL", "plan": "pro"}, "on", True, "TARGETING_MATCH", 0)
case("two prereqs met, no rule", "prerequisites", "two", {"country": "NL", "plan": "team"}, "off", False, "DEFAULT")
case("second prereq fails", "prerequisites", "two", {"country": "NL", "plan": "free"}, "off", False, "PREREQUISITE_FAILED")
case("first prereq fails", "prerequisites", "two", {"country": "DE", "plan": "pro"}, "off", False, "PREREQUISITE_FAILED")
case("off is checked before prereqs", "prerequisites", "off-with-failing-prereq", {"country": "DE"}, "off", False, "DISABLED")
case("the prerequisite itself", "prerequisites", "base", {"country": "NL"}, "on", True, "TARGETING_MATCH", 0)
for u in ["user-1", "user-2", "user-3", "user-4"]:
    p = position("checkout-v2", u)
    ok = p < 50000
    case("prereq on a split %s" % u, "prerequisites", "dep-split", {"targetingKey": u}, "on" if ok else "off", ok,
         "DEFAULT" if ok else "PREREQUISITE_FAILED")
case("prereq on a split without key", "prerequisites", "dep-split", {}, "off", False, "PREREQUISITE_FAILED")

# --- rollouts ------------------------------------------------------------
def rollout(weights, bucketBy=None):
    r = {"weights": [{"variant": v, "weight": w} for v, w in weights]}
    if bucketBy:
        r["bucketBy"] = bucketBy
    return {"rollout": r}

def pick(pos, weights):
    run = 0
    for v, w in weights:
        run += w
        if w and pos < run:
            return v
    raise AssertionError

half = [("on", 50000), ("off", 50000)]
three = [("a", 25000), ("z", 0), ("b", 25000), ("c", 50000)]
ro = {
    "checkout-v2": boolflag(fall=rollout(half), salt="checkout-v2"),
    "same-salt": boolflag(fall=rollout(half), salt="checkout-v2"),
    "three": {"type": "string", "variants": {"a": "A", "b": "B", "c": "C", "z": "Z"}, "on": True, "offVariant": "a", "defaultVariant": "z",
              "salt": "three", "fallthrough": rollout(three)},
    "all-on": boolflag(fall=rollout([("off", 0), ("on", 100000)]), salt="all"),
    "all-off": boolflag(fall=rollout([("on", 0), ("off", 100000)]), salt="all"),
    "one-percent": boolflag(fall=rollout([("on", 1000), ("off", 99000)]), salt="checkout-v2"),
    "rule-split": boolflag([rule([clause("country", "in", ["NL"])], rollout([("on", 30000), ("off", 70000)], "account"), "nl-30")],
                           fall="off", salt="rule-split"),
    "default-on": boolflag(fall=rollout(half), salt="checkout-v2", defaultVariant="on"),
}
known = [("user-1", 64759), ("user-2", 9543), ("héllo", 4028), ("42", 48802)]
for v, want in known:
    assert position("checkout-v2", v) == want, (v, position("checkout-v2", v))
edge = {}
for p in [0, 1, 999, 1000, 24999, 25000, 49999, 50000, 99998, 99999]:
    edge[p] = find("checkout-v2", p)
three_edge = {p: find("three", p, "k") for p in [0, 24999, 25000, 49999, 50000, 99999]}

def split_case(name, flag, salt, weights, ctx, key):
    p = position(salt, key)
    v = pick(p, weights)
    f = ro[flag]
    val = f["variants"][v]
    case(name, "rollouts", flag, ctx, v, val, "SPLIT", position_=p)

for v, want in known:
    split_case("known vector %s" % v, "checkout-v2", "checkout-v2", half, {"targetingKey": v}, v)
split_case("integer targeting key 42", "checkout-v2", "checkout-v2", half, {"targetingKey": 42}, "42")
split_case("integral float targeting key 42.0", "checkout-v2", "checkout-v2", half, {"targetingKey": 42.0}, "42")
split_case("negative integer key", "checkout-v2", "checkout-v2", half, {"targetingKey": -7}, "-7")
# An empty targeting key is a key like any other string. (OpenFeature SDKs
# drop an empty targeting key from the context: through one, pass "" as an
# attribute to get this; docs/FLAGS.md.)
split_case("empty targeting key is a key", "checkout-v2", "checkout-v2", half, {"targetingKey": ""}, "")
# Every integer type a decoder may pick (int8 .. uint64, a float, a decimal
# number object) buckets as the integer's decimal.
for n in [0, 255, -128, 65535, -32768, 4294967295, 2**53, -(2**53)]:
    split_case("integer key %d" % n, "checkout-v2", "checkout-v2", half, {"targetingKey": n}, str(n))
for f in [1000.0, -0.0, float(2**53)]:
    split_case("integral float key %r" % f, "checkout-v2", "checkout-v2", half, {"targetingKey": f}, str(int(f)))
for p, v in sorted(edge.items()):
    split_case("edge position %d" % p, "checkout-v2", "checkout-v2", half, {"targetingKey": v}, v)
    split_case("one percent at position %d" % p, "one-percent", "checkout-v2", [("on", 1000), ("off", 99000)], {"targetingKey": v}, v)
for p, v in sorted(three_edge.items()):
    split_case("three-way edge %d" % p, "three", "three", three, {"targetingKey": v}, v)
for u in ["user-1", "user-2", "a", "", "x" * 200, "日本語", "emoji-🙂"]:
    split_case("salt shared by another flag %r" % u[:20], "same-salt", "checkout-v2", half, {"targetingKey": u}, u)
    split_case("all on %r" % u[:20], "all-on", "all", [("off", 0), ("on", 100000)], {"targetingKey": u}, u)
    split_case("all off %r" % u[:20], "all-off", "all", [("on", 0), ("off", 100000)], {"targetingKey": u}, u)
for ctx, name in [({}, "missing"), ({"targetingKey": True}, "bool"), ({"targetingKey": 42.5}, "fractional"),
                  ({"targetingKey": None}, "null"), ({"targetingKey": 1e300}, "huge float"),
                  ({"targetingKey": float(2**53 + 2)}, "float beyond 2^53"), ({"targetingKey": -0.5}, "negative fractional"), ({"user": "user-1"}, "other attribute")]:
    case("rollout key %s: default variant" % name, "rollouts", "checkout-v2", ctx, "off", False, "DEFAULT")
    case("rollout key %s: default variant on" % name, "rollouts", "default-on", ctx, "on", True, "DEFAULT")
case("three-way key missing: default variant z", "rollouts", "three", {}, "z", "Z", "DEFAULT")
for acct in ["acme", "globex", "initech", "umbrella", "hooli", 1234]:
    p = position("rule-split", str(acct))
    v = pick(p, [("on", 30000), ("off", 70000)])
    case("rule split account %s" % acct, "rollouts", "rule-split", {"country": "NL", "account": acct, "targetingKey": "ignored"},
         v, v == "on", "SPLIT", 0, p)
case("rule split other country", "rollouts", "rule-split", {"country": "DE", "account": "acme"}, "off", False, "DEFAULT")
case("rule split without account", "rollouts", "rule-split", {"country": "NL", "targetingKey": "acme"}, "off", False, "DEFAULT", 0)

# --- positions and invalid sets -----------------------------------------
positions = [{"salt": "checkout-v2", "value": v, "position": p} for v, p in known]
for salt, v in [("checkout-v2", ""), ("", ""), ("", "user-1"), ("a.b", "c"), ("a", "b.c"), ("checkout-v2", "x" * 300),
                ("flag", "日本語"), ("flag", "emoji-🙂"), ("s", "-1"), ("s", "9007199254740992"), ("checkout-v2", "USER-1")]:
    positions.append({"salt": salt, "value": v, "position": position(salt, v)})
for p, v in sorted(edge.items()):
    positions.append({"salt": "checkout-v2", "value": v, "position": p})

S = "cuecast.flags/v1"
def inv(name, flags, errors, schema=S):
    return {"name": name, "set": {"schema": schema, "flags": flags}, "errors": [{"flag": f, "field": fl} for f, fl in errors]}
invalid = [
    inv("weights do not sum", {"f": boolflag(fall=rollout([("on", 50000), ("off", 40000)]))}, [("f", "fallthrough.rollout.weights")]),
    inv("rule weights do not sum", {"f": boolflag([rule([clause("a", "in", ["x"])], rollout([("on", 60000), ("off", 60000)]))])}, [("f", "rules[0].rollout.weights")]),
    inv("unknown off variant", {"f": boolflag(offVariant="nope")}, [("f", "offVariant")]),
    inv("unknown default variant", {"f": boolflag(defaultVariant="nope")}, [("f", "defaultVariant")]),
    inv("unknown rule variant", {"f": boolflag([rule([clause("a", "in", ["x"])], "nope")])}, [("f", "rules[0].variant")]),
    inv("unknown rollout variant", {"f": boolflag(fall=rollout([("on", 50000), ("nope", 50000)]))}, [("f", "fallthrough.rollout.weights[1].variant")]),
    inv("variant of wrong type", {"f": boolflag(variants={"on": True, "off": "no"})}, [("f", "variants.off")]),
    inv("int variant not integral", {"f": dict(types["int"], variants={"small": 1.5, "big": 1000, "neg": -5})}, [("f", "variants.small")]),
    inv("missing prerequisite flag", {"f": boolflag(prerequisites=[{"flag": "ghost", "variant": "on"}])}, [("f", "prerequisites[0].flag")]),
    inv("missing prerequisite variant", {"f": boolflag(prerequisites=[{"flag": "g", "variant": "maybe"}]), "g": boolflag()}, [("f", "prerequisites[0].variant")]),
    inv("self prerequisite", {"f": boolflag(prerequisites=[{"flag": "f", "variant": "on"}])}, [("f", "prerequisites[0].flag")]),
    inv("prerequisite cycle", {"a": boolflag(prerequisites=[{"flag": "b", "variant": "on"}]), "b": boolflag(prerequisites=[{"flag": "c", "variant": "on"}]),
                               "c": boolflag(prerequisites=[{"flag": "a", "variant": "on"}])}, [("c", "prerequisites[0].flag")]),
    inv("numeric operator with string", {"f": boolflag([rule([clause("a", "lt", ["10"])])])}, [("f", "rules[0].clauses[0].values[0]")]),
    inv("bad semver value", {"f": boolflag([rule([clause("a", "semverEq", ["1.2"])])])}, [("f", "rules[0].clauses[0].values[0]")]),
    inv("unknown operator", {"f": boolflag([rule([clause("a", "matches", ["x"])])])}, [("f", "rules[0].clauses[0].values[0]")]),
    inv("rule without clauses", {"f": boolflag([rule([])])}, [("f", "rules[0].clauses")]),
    inv("variant and rollout", {"f": boolflag(fall=dict(rollout(half), variant="on"))}, [("f", "fallthrough")]),
    inv("rule serves nothing", {"f": boolflag([{"clauses": [clause("a", "in", ["x"])]}])}, [("f", "rules[0]")]),
    inv("unknown type", {"f": dict(boolflag(), type="date")}, [("f", "type")]),
    inv("int variant beyond 2^53", {"f": dict(types["int"], variants={"small": 10, "big": 2**60, "neg": -5})}, [("f", "variants.big")]),
    inv("key with a slash", {"new/checkout": boolflag()}, [("new/checkout", "key")]),
]
unsupported = [{"name": "future schema", "set": {"schema": "cuecast.flags/v2", "flags": {}}}]

doc = {
    "format": "cuecast flag vectors",
    "version": 1,
    "schema": S,
    "whole": WHOLE,
    "positions": positions,
    "sets": {
        "operators": {"schema": S, "flags": ops},
        "types": {"schema": S, "flags": types},
        "prerequisites": {"schema": S, "flags": pre},
        "rollouts": {"schema": S, "flags": ro},
    },
    "cases": cases,
    "invalid": invalid,
    "unsupported": unsupported,
}
json.dump(doc, sys.stdout, indent=1, ensure_ascii=False)
sys.stdout.write("\n")
print(len(cases), "cases,", len(positions), "positions,", len(invalid), "invalid", file=sys.stderr)
