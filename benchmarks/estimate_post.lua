-- wrk script: POST /v1/estimate with the same request as benchmarks/bench_api.py.
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.body = '{"preset": "llama2-7b", "training": {"seq_length": 4096, "global_batch_size": 512}, "cluster_id": "dgx-a100-8n", "plan": {"dp": 8, "tp": 8, "pp": 1, "micro_batch_size": 1}}'

-- Count error answers so the summary shows errors, not just throughput (wrk's own tally:
-- no per-response Lua callback, which would cost wrk more CPU than the server's answer).
done = function(summary, latency, requests)
  io.write(string.format("non-2xx responses: %d\n", summary.errors.status))
end
