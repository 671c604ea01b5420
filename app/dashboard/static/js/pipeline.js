// The pipeline schedule of one step, simulated: when each stage runs each micro-batch's forward
// and backward under GPipe, 1F1B or interleaved 1F1B (Narayanan et al. SC'21, Fig. 3-4).
//
// Each device runs its operations in the schedule's order; an operation starts when its device
// is free and its inputs are ready (the forward of the previous virtual stage, the backward of
// the next one). Durations come from the estimate's per-stage figures: forward_s and backward_s
// are compute only, so both are scaled to add up to time_per_microbatch_s, which includes the
// stage's communication; with vpp > 1 each of a device's chunks takes 1/vpp of that.

/** Per-stage {forward, backward} seconds of one micro-batch through one chunk. */
export function stageDurations(perStage, vpp = 1) {
  return perStage.map((stage) => {
    const total = stage.time_per_microbatch_s;
    let forward = stage.forward_s;
    let backward = stage.backward_s;
    const known = forward !== null && forward !== undefined && backward !== null && backward !== undefined;
    if (!known || forward + backward <= 0) {
      // No compute split in the estimate: the usual 1:2 forward:backward ratio.
      forward = total / 3;
      backward = (2 * total) / 3;
    } else {
      const scale = total / (forward + backward);
      forward *= scale;
      backward *= scale;
    }
    return { forward: forward / vpp, backward: backward / vpp, scaled: known };
  });
}

/** Micro-batches in groups of `size` (the last group may be smaller). */
function groups(count, size) {
  const result = [];
  for (let start = 0; start < count; start += size) {
    result.push(Array.from({ length: Math.min(size, count - start) }, (_, i) => start + i));
  }
  return result;
}

/** Forward and backward order of one device's (micro-batch, chunk) pairs. */
function chunkOrder(p, m, v) {
  const forward = [];
  const backward = [];
  for (const group of groups(m, p)) {
    for (let chunk = 0; chunk < v; chunk += 1) for (const mb of group) forward.push({ mb, chunk });
    for (let chunk = v - 1; chunk >= 0; chunk -= 1) for (const mb of group) backward.push({ mb, chunk });
  }
  return { forward, backward };
}

/** The order in which device `s` of `p` runs its operations. */
export function deviceOrder(schedule, p, m, v, s) {
  const { forward, backward } = chunkOrder(p, m, v);
  const F = forward.map((op) => ({ kind: "F", ...op }));
  const B = backward.map((op) => ({ kind: "B", ...op }));
  if (schedule === "gpipe") return [...F, ...B];
  const total = m * v;
  // Megatron-LM's warm-up: forwards before the first backward.
  const warmup = v > 1 ? Math.min(total, (p - s - 1) * 2 + (v - 1) * p) : Math.min(total, p - s - 1);
  const order = F.slice(0, warmup);
  let f = warmup;
  let b = 0;
  while (f < total) {
    order.push(F[f++]);
    order.push(B[b++]);
  }
  while (b < total) order.push(B[b++]);
  return order;
}

const key = (kind, virtualStage, mb) => `${kind}${virtualStage}:${mb}`;

/**
 * Simulate one step. Returns {ops: [{stage, kind, mb, chunk, start, end}], makespan,
 * busy: [seconds per stage], bubbleFraction}. Throws if the order cannot make progress.
 */
export function simulate({ schedule = "1f1b", microBatches, vpp = 1, durations }) {
  const p = durations.length;
  const m = microBatches;
  const v = p > 1 ? vpp : 1;
  const lastVirtual = p * v - 1;
  const orders = durations.map((_, s) => deviceOrder(schedule, p, m, v, s));
  const next = new Array(p).fill(0);
  const free = new Array(p).fill(0);
  const busy = new Array(p).fill(0);
  const finished = new Map();
  const ops = [];
  let remaining = orders.reduce((sum, order) => sum + order.length, 0);

  const ready = (op, s) => {
    const vs = op.chunk * p + s;
    const deps = [];
    if (op.kind === "F") {
      if (vs > 0) deps.push(key("F", vs - 1, op.mb));
    } else {
      deps.push(key("F", vs, op.mb));
      if (vs < lastVirtual) deps.push(key("B", vs + 1, op.mb));
    }
    let start = free[s];
    for (const dep of deps) {
      if (!finished.has(dep)) return null;
      start = Math.max(start, finished.get(dep));
    }
    return start;
  };

  while (remaining > 0) {
    let progressed = false;
    for (let s = 0; s < p; s += 1) {
      while (next[s] < orders[s].length) {
        const op = orders[s][next[s]];
        const start = ready(op, s);
        if (start === null) break;
        const duration = op.kind === "F" ? durations[s].forward : durations[s].backward;
        const end = start + duration;
        finished.set(key(op.kind, op.chunk * p + s, op.mb), end);
        ops.push({ stage: s, kind: op.kind, mb: op.mb, chunk: op.chunk, start, end });
        free[s] = end;
        busy[s] += duration;
        next[s] += 1;
        remaining -= 1;
        progressed = true;
      }
    }
    if (!progressed) throw new Error("the schedule cannot make progress (deadlock)");
  }
  const makespan = Math.max(...free);
  const idle = busy.reduce((sum, time) => sum + (makespan - time), 0);
  return { ops, makespan, busy, bubbleFraction: makespan > 0 ? idle / (makespan * p) : 0 };
}
