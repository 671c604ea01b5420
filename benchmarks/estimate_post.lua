-- wrk script: POST /v1/estimate with the same request as benchmarks/bench_api.py.
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.body = '{"preset": "llama2-7b", "training": {"seq_length": 4096, "global_batch_size": 512}, "cluster_id": "dgx-a100-8n", "plan": {"dp": 8, "tp": 8, "pp": 1, "micro_batch_size": 1}}'

-- Count non-2xx answers so the summary shows errors, not just throughput.
local errors = 0
response = function(status, headers, body)
  if status ~= 200 then errors = errors + 1 end
end
done = function(summary, latency, requests)
  io.write(string.format("non-200 responses: %d\n", summary.errors.status))
end
