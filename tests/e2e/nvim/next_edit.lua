-- Drives Margin's next-edit suggestions from a real headless Neovim. The user's edit is typed
-- (`r` → `radius` on line 4, in insert mode), then:
-- - "far" (MARGIN_NVIM_MODE): the repository's module (editors/nvim/lua/margin/next_edit.lua),
--   set up as the user does, asks margin/nextEdit after the pause and shows the edit on line 5;
--   <Tab> jumps there, <Tab> again accepts it.
-- - "near": the cursor goes before `return` on line 5 and insert mode starts; Neovim's own
--   `vim.lsp.inline_completion` shows the next edit as the inline completion item Margin sends,
--   and `vim.lsp.inline_completion.get()` accepts it.
-- Either way the buffer is written. Environment: MARGIN_NVIM_FILE, MARGIN_NVIM_MODE,
-- MARGIN_NVIM_OUT (JSON results).

local H = dofile(vim.fs.dirname(debug.getinfo(1, "S").source:sub(2)) .. "/harness.lua")
local results, step = H.results, H.step
local mode = assert(os.getenv("MARGIN_NVIM_MODE"))

H.watchdog(100000)

local bufnr, client

local function marks(ns)
  local found = {}
  for _, mark in ipairs(vim.api.nvim_buf_get_extmarks(bufnr, ns, 0, -1, { details = true })) do
    local _, row, col, details = unpack(mark)
    local lines = {}
    for _, line in ipairs(details.virt_lines or {}) do table.insert(lines, line[1][1]) end
    local text = {}
    for _, chunk in ipairs(details.virt_text or {}) do table.insert(text, chunk[1]) end
    table.insert(found, { row = row, col = col, end_row = details.end_row or vim.NIL,
                          end_col = details.end_col or vim.NIL, hl = details.hl_group or vim.NIL,
                          virt_lines = lines, virt_text = table.concat(text) })
  end
  return found
end

local function done()
  H.write_and_finish(bufnr, client, "textDocument/inlineCompletion")
end

local function far()
  local next_edit = require("margin.next_edit")
  assert(vim.wait(30000, function() return next_edit.shown(bufnr) ~= nil end, 20), "no next edit was shown")
  results.shown = marks(next_edit.namespace)
  results.cursor_before = vim.api.nvim_win_get_cursor(0)
  -- <Tab> as typed, through the module's mapping: a jump, then the edit accepted.
  vim.api.nvim_feedkeys(vim.keycode("<Tab>"), "mx", false)
  results.cursor_after_jump = vim.api.nvim_win_get_cursor(0)
  results.lines_after_jump = vim.api.nvim_buf_get_lines(bufnr, 0, -1, false)
  vim.api.nvim_feedkeys(vim.keycode("<Tab>"), "mx", false)
  results.marks_after_accept = #marks(next_edit.namespace)
  done()
end

local function near_in_insert_mode()
  local ns = vim.api.nvim_create_namespace("nvim.lsp.inline_completion")
  assert(vim.wait(30000, function() return #marks(ns) > 0 end, 20), "no inline suggestion was shown")
  results.shown = marks(ns)
  local before = vim.b[bufnr].changedtick
  results.accepted = vim.lsp.inline_completion.get({ bufnr = bufnr })
  assert(vim.wait(10000, function() return vim.b[bufnr].changedtick ~= before end, 20), "not accepted")
  vim.api.nvim_create_autocmd("InsertLeave", {
    buffer = bufnr, once = true, callback = function() vim.schedule(step(done)) end,
  })
  vim.cmd.stopinsert()
end

local function after_the_users_edit()
  results.typed = vim.api.nvim_buf_get_lines(bufnr, 3, 4, false)[1]
  if mode == "far" then
    far()
  else
    vim.lsp.inline_completion.enable(true, { bufnr = bufnr })
    vim.api.nvim_create_autocmd("InsertEnter", {
      buffer = bufnr, once = true, callback = function() vim.schedule(step(near_in_insert_mode)) end,
    })
    vim.api.nvim_win_set_cursor(0, { 5, 4 }) -- before `return`
    vim.api.nvim_feedkeys("i", "n", false)
  end
end

local function main()
  H.use_shipped_config()
  if mode == "far" then require("margin.next_edit").setup({ pause_ms = 200 }) end
  bufnr, client = H.attach()
  -- The user's edit: `a` after the `r` of `def area(r):`, `adius`, <Esc>.
  vim.api.nvim_win_set_cursor(0, { 4, 9 })
  vim.api.nvim_create_autocmd("InsertLeave", {
    buffer = bufnr, once = true, callback = function() vim.schedule(step(after_the_users_edit)) end,
  })
  vim.api.nvim_feedkeys("aadius" .. vim.keycode("<Esc>"), "n", false)
end

H.on_start(main)
