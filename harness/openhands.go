package harness

// OpenHands SDK, the paper's third harness, is not an adapter here: it
// installs from PyPI (openhands-sdk, openhands-tools), which these
// machines cannot reach, so it is documented and untested.
//
// It speaks Chat Completions through LiteLLM. Pointed at the proxy, its
// LLM is
//
//	LLM(model="openai/legorl", base_url="http://127.0.0.1:PORT/rollout/<id>/v1",
//	    api_key="legorl", num_retries=0, drop_params=True,
//	    native_tool_calling=True)
//
// ("openai/" makes LiteLLM use its OpenAI-compatible client with that
// base_url; num_retries=0 makes a proxy error final). Offline, set
// LITELLM_LOCAL_MODEL_COST_MAP=True (no cost-map download) and leave its
// telemetry off; the agent is a Python script that builds an Agent with the
// terminal, file-editor and finish tools, runs a Conversation in the
// workspace on the task, and prints its final state as JSON for Result.
const openHandsDoc = "openhands: documented, not installed (PyPI)"
