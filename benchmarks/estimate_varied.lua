-- wrk script: POST /v1/estimate with a different plan each request, so every request is priced:
-- 4,608 layouts of llama2-7b on the 64 GPUs of dgx-a100-8n (batch x tp x pp x micro-batch x
-- recompute x ZeRO stage), taken in turn, each wrk thread half the list ahead of the other.
-- A body comes back only after 2,304 requests of its thread, by when each server process has
-- priced more than it keeps (app.common.estimate_memo: 1,024), so every request is a miss.
local bodies = {}
for _, batch in ipairs({512, 1024, 2048}) do
for _, tp in ipairs({1, 2, 4, 8}) do
  for _, pp in ipairs({1, 2, 4, 8}) do
    for mbs = 1, 8 do
      for _, recompute in ipairs({"none", "selective", "full"}) do
        for zero = 0, 3 do
          bodies[#bodies + 1] = string.format(
            '{"preset": "llama2-7b", "training": {"seq_length": 4096, "global_batch_size": %d}, '
            .. '"cluster_id": "dgx-a100-8n", "plan": {"dp": %d, "tp": %d, "pp": %d, '
            .. '"micro_batch_size": %d, "recompute": "%s", "zero_stage": %d}}',
            batch, math.floor(64 / (tp * pp)), tp, pp, mbs, recompute, zero)
        end
      end
    end
  end
end
end
local threads = 0
setup = function(thread)
  thread:set("offset", threads * math.floor(#bodies / 2))
  threads = threads + 1
end
local next_body = nil
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"

request = function()
  next_body = ((next_body or offset) % #bodies) + 1
  return wrk.format(nil, nil, nil, bodies[next_body])
end

done = function(summary, latency, requests)
  io.write(string.format("non-2xx responses: %d\n", summary.errors.status))
end
