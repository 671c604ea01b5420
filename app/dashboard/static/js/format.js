// Numbers for people: 1.2M tokens/s, 21.8 s, 46.1 GiB, $0.0308.

const compact = new Intl.NumberFormat("en", { notation: "compact", maximumFractionDigits: 1 });
const integer = new Intl.NumberFormat("en", { maximumFractionDigits: 0 });

const missing = (value) => value === null || value === undefined || Number.isNaN(value);
export const DASH = "—";

export function count(value) {
  return missing(value) ? DASH : integer.format(value);
}

/** 1234 -> 1.2K, 144095 -> 144.1K, 1.2e6 -> 1.2M. */
export function short(value) {
  if (missing(value)) return DASH;
  return Math.abs(value) < 1000 ? sig(value, 3) : compact.format(value);
}

export function sig(value, digits = 3) {
  if (missing(value)) return DASH;
  if (value === 0) return "0";
  const magnitude = Math.floor(Math.log10(Math.abs(value)));
  const decimals = Math.max(0, digits - 1 - magnitude);
  return value.toLocaleString("en", { maximumFractionDigits: Math.min(decimals, 8), minimumFractionDigits: 0 });
}

export function tokensPerS(value) {
  return missing(value) ? DASH : `${short(value)} tokens/s`;
}

export function percent(value, digits = 1) {
  return missing(value) ? DASH : `${(value * 100).toFixed(digits)}%`;
}

/** Seconds: 850 µs, 12.3 ms, 21.8 s, 12.5 min, 5.2 h, 24.1 days. */
export function seconds(value) {
  if (missing(value)) return DASH;
  const abs = Math.abs(value);
  if (abs === 0) return "0 s";
  if (abs < 1e-3) return `${sig(value * 1e6)} µs`;
  if (abs < 1) return `${sig(value * 1e3)} ms`;
  if (abs < 120) return `${sig(value)} s`;
  if (abs < 7200) return `${sig(value / 60)} min`;
  if (abs < 86400 * 2) return `${sig(value / 3600)} h`;
  return `${sig(value / 86400)} days`;
}

export function gib(value) {
  if (missing(value)) return DASH;
  if (Math.abs(value) < 1) return `${sig(value * 1024)} MiB`;
  return `${value.toFixed(1)} GiB`;
}

export function usd(value) {
  if (missing(value)) return DASH;
  if (Math.abs(value) >= 100) return `$${integer.format(value)}`;
  if (Math.abs(value) >= 1) return `$${value.toFixed(2)}`;
  return `$${sig(value, 3)}`;
}

export function bytes(value) {
  if (missing(value)) return DASH;
  const units = ["B", "KB", "MB", "GB", "TB", "PB"];
  let index = 0;
  let scaled = value;
  while (Math.abs(scaled) >= 1000 && index < units.length - 1) {
    scaled /= 1000;
    index += 1;
  }
  return `${sig(scaled)} ${units[index]}`;
}

export function tflops(value) {
  return missing(value) ? DASH : `${sig(value)} TFLOP/s`;
}

export function params(value) {
  return missing(value) ? DASH : compact.format(value);
}

/** "3 min ago", "2 days ago"; the exact time goes in a title attribute. */
export function ago(iso) {
  if (!iso) return DASH;
  const delta = (Date.now() - new Date(iso).getTime()) / 1000;
  if (delta < 45) return "just now";
  if (delta < 3600) return `${Math.round(delta / 60)} min ago`;
  if (delta < 86400) return `${Math.round(delta / 3600)} h ago`;
  return `${Math.round(delta / 86400)} days ago`;
}

export function dateTime(iso) {
  return iso ? new Date(iso).toLocaleString("en-GB", { dateStyle: "medium", timeStyle: "short" }) : DASH;
}

/** A metric's value in its unit (the search objectives' metrics). */
export function metric(name, value) {
  switch (name) {
    case "tokens_per_s":
      return tokensPerS(value);
    case "usd_per_million_tokens":
      return `${usd(value)} / M tokens`;
    case "time_to_train_s":
      return seconds(value);
    default:
      return sig(value);
  }
}

export const METRIC_LABELS = {
  tokens_per_s: "tokens/s",
  usd_per_million_tokens: "$ / M tokens",
  time_to_train_s: "time to train",
};

/** Axis ticks: as many decimals as the tick step needs ($0.03081, $0.03082, ...). */
export function axisTick(value, ticks, unit = "") {
  const step = ticks && ticks.length > 1 ? Math.abs(ticks[1].value - ticks[0].value) : Math.abs(value);
  const decimals = step > 0 ? Math.max(0, Math.min(8, Math.ceil(-Math.log10(step) + 0.3))) : 2;
  if (unit === "$") return `$${value.toFixed(Math.max(decimals, Math.abs(value) >= 1 ? 2 : 0))}`;
  return value.toFixed(decimals);
}
