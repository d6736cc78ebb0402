-- Drives Margin's agent from a real headless Neovim through the repository's module
-- (editors/nvim/lua/margin/agent.lua), set up as a user does. A linter's problem is put on the
-- buffer (and one in Margin's own namespace, which is not forwarded), then `:MarginAgent fix add`
-- runs; `vim.ui.select` is replaced by a person who picks "Accept" (each prompt recorded).
-- MARGIN_NVIM_MODE:
-- - "annotations": Neovim's own capabilities (change annotations advertised): the edit comes
--   as workspace/applyEdit marked needsConfirmation, asked by the module with its diff;
-- - "asked": Margin's client without change annotations (as a user layers it): the server asks
--   with window/showMessageRequest (Accept / Always in this thread / Reject), then applies;
-- - "stop": `:MarginAgentStop` once the first step is done, while the model is asked for the next.
-- The buffer is then written. Environment: MARGIN_NVIM_FILE, MARGIN_NVIM_MODE, MARGIN_NVIM_OUT.

local H = dofile(vim.fs.dirname(debug.getinfo(1, "S").source:sub(2)) .. "/harness.lua")
local results = H.results
local mode = assert(os.getenv("MARGIN_NVIM_MODE"))

H.watchdog(100000)

local function scratch_lines(agent)
  local buf = agent.buffer()
  return buf and vim.api.nvim_buf_get_lines(buf, 0, -1, false) or {}
end

local function shows(agent, wanted)
  for _, line in ipairs(scratch_lines(agent)) do
    if line:find(wanted, 1, true) then return true end
  end
  return false
end

-- The agent thread's messages, once the cancelled turn has let go of it (3 kept: the task, the
-- first step's action and its result).
local function kept_roles(bufnr, client)
  local roles
  assert(vim.wait(15000, function()
    local threads = vim.lsp.buf_request_sync(bufnr, "margin/threads", {}, 5000)[client.id].result.threads
    local thread = vim.iter(threads):find(function(t) return t.title == "look at calc" end)
    if not thread then return false end
    local history = vim.lsp.buf_request_sync(bufnr, "margin/history", { threadId = thread.id }, 5000)
    roles = vim.tbl_map(function(m) return m.role end, history[client.id].result.messages)
    return #roles == 3
  end, 50), "the cancelled turn's steps were not kept")
  return roles
end

local function main()
  H.use_shipped_config()
  if mode == "asked" then
    vim.lsp.config("margin", {
      capabilities = { workspace = { workspaceEdit = { changeAnnotationSupport = vim.NIL } } },
    })
  end
  local agent = require("margin.agent")
  agent.setup()
  results.asked = {}
  vim.ui.select = function(items, opts, on_choice)
    table.insert(results.asked, { prompt = opts.prompt, items = items })
    local at = assert(vim.iter(ipairs(items)):find(function(_, item) return item == "Accept" end))
    on_choice(items[at], at)
  end
  local done
  vim.api.nvim_create_autocmd("User", {
    pattern = "MarginAgentDone", callback = function(args) done = args.data end,
  })
  local bufnr, client = H.attach()
  local linter = vim.api.nvim_create_namespace("test.linter")
  vim.diagnostic.set(linter, bufnr, { {
    lnum = 1, col = 11, end_lnum = 1, end_col = 16, severity = vim.diagnostic.severity.WARN,
    message = "add subtracts b from a", source = "testlint",
  } })
  vim.diagnostic.set(vim.lsp.diagnostic.get_namespace(client.id), bufnr, { {
    lnum = 0, col = 0, severity = vim.diagnostic.severity.HINT, message = "Margin's own note",
  } })

  -- "asked" gives the task on a range: lines 1-2 selected.
  vim.cmd(({ stop = "MarginAgent look at calc", asked = "1,2MarginAgent fix add" })[mode] or "MarginAgent fix add")
  results.running = agent.running()
  if mode == "stop" then
    assert(vim.wait(30000, function() return shows(agent, "step 2 (") end, 20), "step 2 did not begin")
    vim.cmd("MarginAgentStop")
  end
  assert(vim.wait(60000, function() return done ~= nil end, 20), "the agent's run did not end")
  H.wait_answered(client, "margin/agent") -- a cancelled request too: the server has answered it
  results.done = { error = done.error or vim.NIL, cancelled = done.cancelled or false }
  if done.result then
    local r = done.result
    results.done.stopped, results.done.answer, results.done.edits = r.stopped, r.answer, r.edits
    results.done.protocol, results.done.thread = r.protocol, r.threadId
    results.done.calls = vim.tbl_map(function(s) return #s.calls end, r.steps)
  end
  results.running_after = agent.running()
  results.scratch = scratch_lines(agent)
  results.scratch_name = vim.api.nvim_buf_get_name(agent.buffer())
  results.scratch_shown = #vim.fn.win_findbuf(agent.buffer()) > 0
  results.current_is_file = vim.api.nvim_get_current_buf() == bufnr
  results.buffer_before_write = vim.api.nvim_buf_get_lines(bufnr, 0, -1, false)
  results.disk_before_write = vim.fn.readfile(vim.api.nvim_buf_get_name(bufnr))
  if mode == "stop" then results.kept = kept_roles(bufnr, client) end
  H.write_and_finish(bufnr, client, "margin/agent")
end

H.on_start(main)
