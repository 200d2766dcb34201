"""The wire codecs over the service: one operation table (`operations`) that JSON-RPC
(`jsonrpc`), REST (`rest`) and the seeds' routes (`http`) run, SSE framing (`sse`), the
`a2a` function's HTTP face (`http`) and the Cloud Tasks targets' (`queue_target`)."""
