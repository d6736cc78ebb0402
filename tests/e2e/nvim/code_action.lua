-- Drives a Margin code action from a real headless Neovim: select lines in visual mode, ask
-- for code actions on the selection, choose Margin's, let Neovim resolve and apply it, write
-- the buffer. Environment: MARGIN_NVIM_FILE (the file to edit), MARGIN_NVIM_TITLE (the action
-- to choose), MARGIN_NVIM_LINES ("first,last", 1-based), MARGIN_NVIM_OUT (JSON results).

local out = assert(os.getenv("MARGIN_NVIM_OUT"))
local results = { nvim = tostring(vim.version()) }

local function main()
  vim.lsp.config("margin", { cmd = { "margin-lsp" }, filetypes = { "python" }, root_markers = { ".git" } })
  vim.lsp.enable("margin")
  vim.cmd.edit(vim.fn.fnameescape(assert(os.getenv("MARGIN_NVIM_FILE"))))
  local bufnr = vim.api.nvim_get_current_buf()
  local client
  assert(vim.wait(20000, function()
    client = vim.lsp.get_clients({ bufnr = bufnr, name = "margin" })[1]
    return client ~= nil and client.initialized
  end, 50), "margin-lsp did not start")

  -- Select whole lines (V), as a person does; the marks '< and '> hold the selection after it.
  local first, last = assert(os.getenv("MARGIN_NVIM_LINES")):match("(%d+),(%d+)")
  vim.cmd("normal! " .. first .. "GV" .. last .. "G\27")
  results.offered = {}
  local before = vim.b[bufnr].changedtick
  local wanted = assert(os.getenv("MARGIN_NVIM_TITLE"))
  vim.lsp.buf.code_action({
    range = { start = vim.api.nvim_buf_get_mark(bufnr, "<"), ["end"] = vim.api.nvim_buf_get_mark(bufnr, ">") },
    filter = function(action)
      table.insert(results.offered, action.title)
      return action.title == wanted
    end,
    apply = true,
  })
  results.applied = vim.wait(30000, function() return vim.b[bufnr].changedtick ~= before end, 50)
  -- The server's copy against the buffer (before writing: resetting 'modified' bumps the tick).
  local response = assert(vim.lsp.buf_request_sync(bufnr, "margin/status", {}, 15000))
  local status = assert(response[client.id]).result
  results.server_fingerprint = status.files[1].fingerprint
  results.server_version = status.files[1].version
  results.changedtick = vim.b[bufnr].changedtick
  vim.cmd.write()
  results.fileformat = vim.bo[bufnr].fileformat
  client:stop()
  vim.wait(10000, function() return client:is_stopped() end, 50)
end

vim.api.nvim_create_autocmd("VimEnter", {
  once = true,
  callback = function()
    vim.schedule(function()
      local ok, err = pcall(main)
      if not ok then results.error = tostring(err) end
      local handle = assert(io.open(out, "w"))
      handle:write(vim.json.encode(results))
      handle:close()
      vim.cmd(ok and "qall!" or "cquit 1")
    end)
  end,
})
