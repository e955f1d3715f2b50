// How each agent client is set up and run headless against a cedar endpoint, as its own docs tell
// a user to point it at an OpenAI- or Anthropic-compatible server (docs/AGENTS.md says the same to
// users), with the switches that keep it offline: no telemetry, no update checks, no plugin or
// model-list downloads. Every client gets a fresh HOME; the versions are pinned by
// tests/agents/package-lock.json.
import fs from 'node:fs';
import path from 'node:path';
import { CLIENT_BIN } from './harness.mjs';

export const MODEL = 'deepseek-v4-flash';

function write(file, text) {
  fs.mkdirSync(path.dirname(file), { recursive: true });
  fs.writeFileSync(file, text);
}

// Each client: `routes` it can speak, the shell tool it offers (name and how its arguments
// are spelled for a command), and `setup(sb, url, route)` -> {cmd, args(prompt), env}.
export const CLIENTS = [
  {
    name: 'claude-code',
    pkg: '@anthropic-ai/claude-code',
    routes: ['anthropic'],
    shell: { tool: 'Bash', args: (c) => ({ command: c, description: 'Write the probe file' }) },
    setup(sb, url) {
      return {
        cmd: path.join(CLIENT_BIN, 'claude'),
        args: (prompt) => ['-p', prompt, '--max-turns', '4', '--allowedTools', 'Bash'],
        env: {
          ANTHROPIC_BASE_URL: url, ANTHROPIC_API_KEY: 'cedar', ANTHROPIC_MODEL: MODEL,
          ANTHROPIC_DEFAULT_HAIKU_MODEL: MODEL, ANTHROPIC_DEFAULT_SONNET_MODEL: MODEL,
          ANTHROPIC_DEFAULT_OPUS_MODEL: MODEL,
          CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1', DISABLE_AUTOUPDATER: '1',
          DISABLE_TELEMETRY: '1', DISABLE_ERROR_REPORTING: '1', DISABLE_BUG_COMMAND: '1',
        },
      };
    },
  },
  {
    name: 'codex',
    pkg: '@openai/codex',
    routes: ['responses'],
    shell: { tool: 'exec_command', args: (c) => ({ cmd: c }) },
    setup(sb, url) {
      const home = path.join(sb.home, '.codex');
      write(path.join(home, 'config.toml'), [
        `model = "${MODEL}"`,
        'model_provider = "cedar"',
        'check_for_update_on_startup = false',
        '[model_providers.cedar]',
        'name = "cedar"',
        `base_url = "${url}/v1"`,
        'wire_api = "responses"',
        '[analytics]',
        'enabled = false',
        '[feedback]',
        'enabled = false',
        '[features]',
        'plugins = false',
        '',
      ].join('\n'));
      return {
        cmd: path.join(CLIENT_BIN, 'codex'),
        args: (prompt) => ['exec', '--skip-git-repo-check',
                           '--dangerously-bypass-approvals-and-sandbox', prompt],
        env: { CODEX_HOME: home },
      };
    },
  },
  {
    name: 'opencode',
    pkg: 'opencode-ai',
    routes: ['chat', 'anthropic'],
    shell: { tool: 'bash', args: (c) => ({ command: c, description: 'Write the probe file' }) },
    setup(sb, url, route) {
      const provider = route === 'chat'
        ? { npm: '@ai-sdk/openai-compatible', options: { baseURL: `${url}/v1`, apiKey: 'cedar' } }
        : { npm: '@ai-sdk/anthropic', options: { baseURL: `${url}/v1`, apiKey: 'cedar' } };
      const dir = path.join(sb.home, '.config', 'opencode');
      // OpenCode installs its plugin package into every config directory in the background and
      // has no switch against it; a directory whose lock file already lists it is left alone.
      const dep = { '@opencode-ai/plugin': '1.18.33' };
      write(path.join(dir, 'package.json'), JSON.stringify({ dependencies: dep }));
      write(path.join(dir, 'package-lock.json'),
            JSON.stringify({ packages: { '': { dependencies: dep } } }));
      fs.mkdirSync(path.join(dir, 'node_modules'), { recursive: true });
      write(path.join(dir, 'opencode.json'), JSON.stringify({
        $schema: 'https://opencode.ai/config.json',
        autoupdate: false,
        share: 'disabled',
        permission: { bash: 'allow', edit: 'allow' },
        provider: { cedar: { name: 'cedar', ...provider, models: { [MODEL]: { name: MODEL } } } },
        model: `cedar/${MODEL}`,
      }, null, 2));
      return {
        cmd: path.join(CLIENT_BIN, 'opencode'),
        args: (prompt) => ['run', prompt],
        env: {
          OPENCODE_DISABLE_AUTOUPDATE: '1', OPENCODE_DISABLE_MODELS_FETCH: '1',
          OPENCODE_DISABLE_LSP_DOWNLOAD: '1', OPENCODE_DISABLE_SHARE: '1',
          OPENCODE_DISABLE_DEFAULT_PLUGINS: '1', OPENCODE_DISABLE_CLAUDE_CODE: '1',
          OPENCODE_DISABLE_EXTERNAL_SKILLS: '1', OPENCODE_PURE: '1',
        },
      };
    },
  },
  {
    name: 'qwen-code',
    pkg: '@qwen-code/qwen-code',
    routes: ['chat', 'anthropic', 'responses'],
    shell: { tool: 'run_shell_command', args: (c) => ({ command: c, is_background: false }) },
    setup(sb, url, route) {
      const authType = { chat: 'openai', anthropic: 'anthropic', responses: 'openai-responses' }[route];
      write(path.join(sb.home, '.qwen', 'settings.json'), JSON.stringify({
        security: { auth: { selectedType: authType } },
        general: { disableAutoUpdate: true, disableUpdateNag: true },
        privacy: { usageStatisticsEnabled: false },
        telemetry: { enabled: false },
        // no background memory-extraction agent after each session: not what is tested here
        memory: { enableManagedAutoMemory: false },
      }, null, 2));
      return {
        cmd: path.join(CLIENT_BIN, 'qwen'),
        args: (prompt) => ['-p', prompt, '--yolo', '--auth-type', authType, '-m', MODEL,
                           '--max-session-turns', '4'],
        env: route === 'anthropic'
          ? { ANTHROPIC_BASE_URL: url, ANTHROPIC_API_KEY: 'cedar' }
          : { OPENAI_BASE_URL: `${url}/v1`, OPENAI_API_KEY: 'cedar', OPENAI_MODEL: MODEL },
      };
    },
  },
  {
    name: 'cline',
    pkg: 'cline',
    routes: ['chat'],
    shell: { tool: 'run_commands', args: (c) => ({ commands: [c] }) },
    setup(sb, url) {
      const config = path.join(sb.home, '.cline');
      const settings = path.join(config, 'data', 'settings', 'global-settings.json');
      write(settings, JSON.stringify({ telemetryOptOut: true, autoUpdateEnabled: false }));
      return {
        cmd: path.join(CLIENT_BIN, 'cline'),
        // the provider is configured as its docs say, by `cline auth` (run first, see below)
        auth: ['auth', '-p', 'openai', '-k', 'cedar', '-m', MODEL, '-b', `${url}/v1`,
               '--config', config],
        args: (prompt) => ['--config', config, '-t', '200', prompt],
        env: { CLINE_NO_AUTO_UPDATE: '1', CLINE_GLOBAL_SETTINGS_PATH: settings },
      };
    },
  },
];
