-- wrk script: count non-2xx answers so the summary shows errors, not just throughput.
done = function(summary, latency, requests)
  io.write(string.format("non-2xx responses: %d\n", summary.errors.status))
end
