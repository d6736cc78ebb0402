-- Drives Margin's inline completion from a real headless Neovim through Neovim's own
-- `vim.lsp.inline_completion`: enable it for the buffer, enter insert mode at the end of a line
-- (the InsertEnter autocmd of Neovim's module sends the automatic request), wait for the
-- suggestion the module shows as an extmark, accept it with `vim.lsp.inline_completion.get()`,
-- leave insert mode and write the buffer. Environment: MARGIN_NVIM_FILE (the file to edit),
-- MARGIN_NVIM_LINE (1-based line to append at), MARGIN_NVIM_OUT (JSON results).

local H = dofile(vim.fs.dirname(debug.getinfo(1, "S").source:sub(2)) .. "/harness.lua")
local results, step = H.results, H.step
results.requests = {}

-- Whatever goes wrong (insert mode never entered, say), Neovim does not hang.
H.watchdog(100000)

local ns = vim.api.nvim_create_namespace("nvim.lsp.inline_completion") -- the module's own
local bufnr, client

local function shown()
  return vim.api.nvim_buf_get_extmarks(bufnr, ns, 0, -1, { details = true })
end

-- Back in normal mode: nothing more is asked, the buffer is written.
local function after_insert_mode()
  results.mode_after = vim.api.nvim_get_mode().mode
  -- No automatic request is waiting on the module's debounce timer (a private field, looked at
  -- to prove the count of requests below is final).
  local completor = require("vim.lsp._capability").all.inline_completion.active[bufnr]
  local timer = completor and completor.timer
  results.request_scheduled = timer ~= nil and not timer:is_closing() and timer:is_active()
  -- Every inlineCompletion request Neovim sent has been answered (and the buffer written).
  H.write_and_finish(bufnr, client, "textDocument/inlineCompletion")
end

-- In insert mode (scheduled from InsertEnter): wait for the suggestion, accept it, leave.
local function in_insert_mode()
  results.mode_in_insert = vim.api.nvim_get_mode().mode
  assert(vim.wait(30000, function() return #shown() > 0 end, 20), "no suggestion was shown")
  local marks = shown()
  results.marks = #marks
  local _, row, col, details = unpack(marks[1])
  local text = {}
  for _, chunk in ipairs(details.virt_text or {}) do
    table.insert(text, chunk[1])
  end
  results.shown = {
    row = row, col = col, text = table.concat(text), highlight = details.virt_text[1][2],
    pos = details.virt_text_pos, virt_lines = #(details.virt_lines or {}),
  }
  local before = vim.b[bufnr].changedtick
  results.accepted = vim.lsp.inline_completion.get({ bufnr = bufnr }) -- applies it scheduled
  assert(results.accepted, "inline_completion.get() had nothing to accept")
  assert(vim.wait(10000, function() return vim.b[bufnr].changedtick ~= before end, 20),
    "accepting did not change the buffer")
  results.cursor_after_accept = vim.api.nvim_win_get_cursor(0)
  results.marks_after_accept = #shown()
  -- Leave insert mode before the insert loop runs again: the accepted text moved the cursor, and
  -- a CursorMovedI there would start another (debounced) request for what follows it.
  vim.api.nvim_create_autocmd("InsertLeave", {
    buffer = bufnr,
    once = true,
    callback = function() vim.schedule(step(after_insert_mode)) end,
  })
  vim.cmd.stopinsert()
end

local function main()
  bufnr, client = H.attach()
  results.supports = client:supports_method("textDocument/inlineCompletion", bufnr)
  -- What Neovim's module asks, as sent (its requests go through client:request).
  results.params = {}
  local request = client.request
  client.request = function(self, method, params, ...)
    if method == "textDocument/inlineCompletion" then table.insert(results.params, params) end
    return request(self, method, params, ...)
  end
  vim.api.nvim_create_autocmd("LspRequest", {
    buffer = bufnr,
    callback = function(args)
      local request = args.data.request
      if request.method == "textDocument/inlineCompletion" then
        table.insert(results.requests, request.type)
      end
    end,
  })

  vim.lsp.inline_completion.enable(true, { bufnr = bufnr })
  results.enabled = vim.lsp.inline_completion.is_enabled({ bufnr = bufnr })
  vim.api.nvim_create_autocmd("InsertEnter", {
    buffer = bufnr,
    once = true,
    callback = function() vim.schedule(step(in_insert_mode)) end,
  })
  -- Typed keys, run by Neovim's own command loop once this callback returns: "A" appends at the
  -- end of the line, and entering insert mode fires the module's automatic request.
  vim.api.nvim_win_set_cursor(0, { tonumber(assert(os.getenv("MARGIN_NVIM_LINE"))), 0 })
  vim.api.nvim_feedkeys("A", "n", false)
end

H.on_start(main)
