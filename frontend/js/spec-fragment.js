// The "advanced" part of the run form: the spec fields the form does not show, kept as a JSON
// fragment that is deep-merged into the spec the form builds, so a clone loses nothing.

const isMap = (v) => v !== null && typeof v === "object" && !Array.isArray(v);

/**
 * Returns what `spec` holds that `built` (the spec the form reads) does not: keys the form
 * never sets, recursively. Nulls, empty maps and values equal to `defaults` (shaped as the spec)
 * are left out: they are the spec's defaults.
 */
export function unmodelled(spec, built, defaults = {}) {
  const out = {};
  for (const [key, value] of Object.entries(spec ?? {})) {
    if (value === null || (isMap(value) && !Object.keys(value).length) || defaults?.[key] === value) continue;
    if (built?.[key] === undefined) out[key] = value;
    else if (isMap(value) && isMap(built[key])) {
      const inner = unmodelled(value, built[key], defaults?.[key]);
      if (Object.keys(inner).length) out[key] = inner;
    }
  }
  return out;
}

/** Returns `spec` with `fragment` merged in: maps merge key by key, any other value replaces. */
export function merge(spec, fragment) {
  const out = { ...spec };
  for (const [key, value] of Object.entries(fragment)) {
    out[key] = isMap(value) && isMap(out[key]) ? merge(out[key], value) : value;
  }
  return out;
}

/**
 * Returns the fragment typed in the advanced box (blank is `{}`).
 * @throws {SyntaxError} with a message for the user when it is not a JSON object.
 */
export function parseFragment(text) {
  if (!text.trim()) return {};
  let value;
  try {
    value = JSON.parse(text);
  } catch (err) {
    throw new SyntaxError(`advanced fields must be JSON: ${err.message}`);
  }
  if (!isMap(value)) throw new SyntaxError(`advanced fields must be a JSON object such as {"dataset": {"options": {}}}; got ${JSON.stringify(value)}.`);
  return value;
}
