-- Drives margin-lsp from a real headless Neovim: opens files, edits them the ways a person
-- does, and records the server's virtual file (version, fingerprint) beside the buffer's own.
-- Environment: MARGIN_NVIM_STYLE ("0.8" or "0.11" set-up, as in the README, or "shipped":
-- editors/nvim/lsp/margin.lua through the runtimepath), MARGIN_NVIM_OUT (where to write the JSON
-- results), MARGIN_NVIM_UNIX and MARGIN_NVIM_DOS (files to edit), MARGIN_NVIM_EDITORS (editors/nvim).

local style = assert(os.getenv("MARGIN_NVIM_STYLE"))
local out = assert(os.getenv("MARGIN_NVIM_OUT"))
local results = { nvim = tostring(vim.version()) }
-- For the shipped config (used by the "shipped" style) and what each style's client ran.
local H = dofile(vim.fs.dirname(debug.getinfo(1, "S").source:sub(2)) .. "/harness.lua")

local function margin_client(bufnr)
  local found
  assert(vim.wait(20000, function()
    found = vim.lsp.get_clients({ bufnr = bufnr, name = "margin" })[1]
    return found ~= nil and found.initialized
  end, 50), "margin-lsp did not start and initialize for buffer " .. bufnr)
  return found
end

local function open(path)
  vim.cmd.edit(vim.fn.fnameescape(path))
  local bufnr = vim.api.nvim_get_current_buf()
  return bufnr, margin_client(bufnr)
end

local function record(label, bufnr, client)
  local response = assert(vim.lsp.buf_request_sync(bufnr, "margin/status", {}, 15000))
  local reply = assert(response[client.id], "no margin/status answer")
  assert(not reply.err, vim.inspect(reply.err))
  local uri = vim.uri_from_bufnr(bufnr)
  local file
  for _, f in ipairs(reply.result.files) do
    if f.uri == uri then file = f end
  end
  assert(file, "the server has no virtual file for " .. uri)
  local eol = vim.bo[bufnr].fileformat == "dos" and "\r\n" or "\n"
  local text = table.concat(vim.api.nvim_buf_get_lines(bufnr, 0, -1, false), eol)
  if vim.bo[bufnr].eol then text = text .. eol end
  results[label] = {
    uri = uri,
    server_version = file.version,
    server_fingerprint = file.fingerprint,
    changedtick = vim.b[bufnr].changedtick,
    buffer_fingerprint = "sha256:" .. vim.fn.sha256(text),
    fileformat = vim.bo[bufnr].fileformat,
    server_encoding = reply.result.positionEncoding,
    client_encoding = client.offset_encoding,
  }
end

local function main()
  -- The README's set-up snippets, verbatim.
  if style == "0.11" then
    -- README snippet nvim-0.11 begin
    vim.lsp.config("margin", {
      cmd = { "margin-lsp" },
      filetypes = { "python", "lua", "rust", "typescript", "go" },
      root_markers = { ".git" },
    })
    vim.lsp.enable("margin")
    -- README snippet nvim-0.11 end
  elseif style == "shipped" then
    -- editors/README.md: editors/nvim on the runtimepath, the file used as it is.
    H.use_shipped_config()
    vim.lsp.enable("margin")
  else
    -- README snippet nvim-0.8 begin
    vim.api.nvim_create_autocmd("FileType", {
      pattern = { "python", "lua", "rust", "typescript", "go" },
      callback = function(args)
        local root = vim.fs.find({ ".git" }, { upward = true, path = vim.fs.dirname(args.file) })[1]
        vim.lsp.start({
          name = "margin",
          cmd = { "margin-lsp" },
          root_dir = root and vim.fs.dirname(root) or vim.fn.getcwd(),
        })
      end,
    })
    -- README snippet nvim-0.8 end
  end

  -- A UTF-8 file with emoji: edits through the API, normal-mode typing, a multi-line
  -- replacement and an undo.
  local unix, client = open(assert(os.getenv("MARGIN_NVIM_UNIX")))
  H.record_config(results, client)
  vim.api.nvim_buf_set_lines(unix, 0, 0, false, { "# 😀 greeting" })
  vim.api.nvim_buf_set_text(unix, 0, 6, 0, 6, { "✨" }) -- byte column 6: just after the emoji
  vim.api.nvim_buf_set_text(unix, 1, 4, 1, 9, { "wave" })
  vim.cmd("normal! Goprint(wave('é 😀'))")
  -- Compare now as well as at the end: a later whole-line edit could hide a divergence.
  record("unix_typed", unix, client)
  vim.api.nvim_buf_set_text(unix, 1, 0, 2, 4, { "def wave(name):", "    # multi", "    " })
  vim.cmd("let &undolevels = &undolevels") -- close the undo block, as a pause in typing does
  vim.cmd("normal! ggdd")
  vim.cmd("undo")
  vim.cmd("normal! 3GA  # ünïcode")
  record("unix", unix, client)
  vim.cmd.write()

  -- A CRLF file: Neovim keeps fileformat=dos and sends \r\n line ends.
  local dos, dos_client = open(assert(os.getenv("MARGIN_NVIM_DOS")))
  vim.api.nvim_buf_set_lines(dos, 1, 1, false, { "inserted = '😀'" })
  vim.api.nvim_buf_set_text(dos, 0, 4, 0, 5, { "42" })
  record("dos_inserted", dos, dos_client)
  vim.cmd("normal! ggJ")
  vim.cmd("normal! Goend = True")
  record("dos", dos, dos_client)
  vim.cmd.write()

  results.same_client = client.id == dos_client.id
  client:stop()
  results.stopped = vim.wait(10000, function() return client:is_stopped() end, 50)
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
