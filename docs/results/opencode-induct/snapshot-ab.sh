#!/bin/sh
# A/B: OpenCode start to its first main-turn request, with and without "snapshot": false; alternating rounds.
# Run from the checkout after make test-harnesses, with a server on 127.0.0.1:18555 that answers every
# POST with HTTP 400 (OpenCode then ends after its first call); it writes under /tmp/ab.
OC=$(readlink -f tools/harnesses/node_modules/opencode-ai/bin/opencode.exe)
for round in 1 2; do
for v in default nosnap; do
  H=/tmp/ab/$v-$round; rm -rf $H; mkdir -p $H/config $H/ws; cd $H/ws; git init -q; echo "x = 1" > a.py; git add a.py; git -c user.email=a@b -c user.name=a commit -qm base
  if [ $v = nosnap ]; then extra='"snapshot": false,'; else extra=''; fi
  cat > $H/config/opencode.json <<J
{"\$schema": "https://opencode.ai/config.json", "autoupdate": false, "share": "disabled", $extra "model": "legorl/legorl", "small_model": "legorl/legorl",
 "provider": {"legorl": {"npm": "@ai-sdk/openai-compatible", "name": "legorl", "options": {"baseURL": "http://127.0.0.1:18555/v1", "apiKey": "legorl"},
   "models": {"legorl": {"name": "legorl", "limit": {"context": 32768, "output": 4096}}}}},
 "permission": {"bash": "allow", "edit": "allow", "webfetch": "deny"}}
J
  s=$(date +%s.%N)
  env -i PATH=/usr/bin:/bin HOME=$H XDG_CONFIG_HOME=$H/.config XDG_DATA_HOME=$H/.local/share XDG_CACHE_HOME=$H/.cache XDG_STATE_HOME=$H/.local/state OPENCODE_CONFIG=$H/config/opencode.json OPENCODE_DISABLE_AUTOUPDATE=1 OPENCODE_DISABLE_MODELS_FETCH=1 OPENCODE_DISABLE_LSP_DOWNLOAD=1 OPENCODE_DISABLE_SHARE=1 OPENCODE_DISABLE_DEFAULT_PLUGINS=1 OPENCODE_DISABLE_CLAUDE_CODE=1 OPENCODE_DISABLE_EXTERNAL_SKILLS=1 timeout 600 $OC run --print-logs --format json "Fix the bug in a.py" </dev/null >$H/out.txt 2>$H/err.txt
  e=$(date +%s.%N)
  echo "round $round $v: $(echo "$e - $s" | bc) s wall, load $(cut -d' ' -f1 /proc/loadavg), snapshot lines $(grep -c 'tracking\|snapshot' $H/err.txt)"
done; done
