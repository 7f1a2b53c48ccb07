// Package remote is the engine for users with GPUs: it speaks to a vLLM or
// SGLang server with token ids in and token ids, logprobs and MoE routed
// experts out, and offers the local engine's method,
//
//	Generate(ctx, engine.Request, emit func(engine.Token)) (engine.Generation, error)
//
// so the proxy can use either. Nothing is tokenized here: the prompt goes out
// as ids and the completion comes back as ids, checked against the
// vocabulary, with every logprob checked to be present and finite.
//
// # vLLM
//
// NewVLLM posts to the OpenAI-compatible /v1/completions with "prompt" as a
// list of token ids, every sampling parameter set explicitly (vLLM fills
// missing ones from the model's generation_config.json), "logprobs": 1,
// "return_tokens_as_token_ids" (logprobs.tokens come back as "token_id:N")
// and "return_token_ids" (choices[].token_ids and prompt_token_ids, vLLM
// 0.10.2 and later; both are read and must agree). Start the server with
//
//	vllm serve MODEL --logprobs-mode processed_logprobs [--enable-return-routed-experts]
//
// By default (raw_logprobs) vLLM reports logprobs of the model's distribution
// before temperature and top-k/top-p; the engine contract, and the trainer's
// train-inference correlation check, need the distribution the token was
// drawn from, which is processed_logprobs ("Processed means the values after
// applying all processors, including temperature and top_k/top_p",
// https://docs.vllm.ai/en/stable/configuration/engine_args/). The adapter
// cannot see the server's flag: Options.Logprobs records what it assumes
// (LogprobsProcessed for vLLM) and Engine.LogprobsMode reports it; a server
// left on raw_logprobs is only correct for engine.DefaultSampling, so set
// Options.Logprobs to LogprobsRaw for it and other sampling is refused.
//
// With --enable-return-routed-experts vLLM returns choices[].routed_experts,
// base64 of np.save of an array (prompt+completion-1, layers, k) (the
// comment on CompletionResponseChoice in
// vllm/entrypoints/openai/completion/protocol.py; some 0.21 releases send
// the prompt's rows apart as a top-level prompt_routed_experts, which is
// also read). vLLM sends routes only in non-streaming responses (vllm
// pull 51906), so with Options.Routing the vLLM engine does not stream.
//
// # SGLang
//
// NewSGLang posts to the native /generate with "input_ids",
// "sampling_params" (max_new_tokens, temperature, top_p, top_k, min_p,
// penalties, stop_token_ids, ignore_eos, no_stop_trim, sampling_seed),
// "return_logprob": true and "logprob_start_len": -1, and reads
// meta_info.output_token_logprobs ([logprob, token_id, text] triples),
// finish_reason ({"type": "stop"|"length"|"abort", ...}), prompt_tokens,
// completion_tokens, cached_tokens, weight_version and, with
// "return_routed_experts" and a server started with
// --enable-return-routed-experts, routed_experts: base64 of the flattened
// int32 array (prompt+completion-1, layers, k)
// (https://docs.sglang.ai/basic_usage/sampling_params.html; sglang's
// extract_routed_experts_from_meta_info). SGLang's logprobs are taken after
// temperature and before top-k/top-p truncation
// (python/sglang/srt/layers/sampler.py), so the SGLang engine refuses
// top-p < 1 and top-k (LogprobsTemperature). A streamed chunk is cumulative
// (the default) or incremental (--incremental-streaming-output); the adapter
// tells them apart by meta_info.completion_tokens. With
// Options.VersionFromServer each chunk's tokens record the server's
// weight_version (--weight-version N, and the weight_version of SGLang's
// weight-update calls).
//
// # Both
//
// Both are asked to ignore EOS so that only Request.StopTokens end a
// generation, as in the contract. Streaming (Options.Stream) reads
// "data: <json>" server-sent events up to "data: [DONE]"; a stream that
// ends before it is ErrUnavailable. Routes are per token as the tokens went
// through the model: row i routes token i of prompt+completion, so
// Generation.PromptRouting has one entry per prompt token and
// Generation.Routing one per completion token, the last nil: neither
// server feeds the last sampled token back through the model, so neither
// has a route for it (the local engine does, as it puts that token in its
// cache). The route only matters once the token is part of a later prompt,
// whose PromptRouting then has it. vLLM reports no weight version: Options.Version, changed with
// SetVersion after the server loads new weights, is recorded instead.
//
// # Testing
//
// No vLLM or SGLang server ran while this package was written or tested:
// neither runs on the project's CPU machines. Package remotetest holds fake
// servers (net/http/httptest) that check incoming requests field by field
// and answer in the request and response shapes documented by the sources
// named above (vLLM's CompletionRequest/CompletionResponse/
// CompletionStreamResponse and its test_return_routed_experts.py; SGLang's
// GenerateReqInput, its output processor's meta_info and its
// routed-experts tests). Where those sources and a real server disagree,
// the server is right and the fakes and this package should follow it.
package remote
