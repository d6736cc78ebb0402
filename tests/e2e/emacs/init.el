;;; init.el --- docs/editors.md's Emacs set-up, run as it is by the real-Emacs test  -*- lexical-binding: t; -*-
(with-eval-after-load 'eglot
  (add-to-list 'eglot-server-programs '(python-mode . ("margin-lsp"))))
(add-hook 'python-mode-hook #'eglot-ensure)
(setq eglot-confirm-server-initiated-edits nil) ; apply Margin's edits without asking
