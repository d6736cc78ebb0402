;;; chat_editops.el --- chat and edit-ops from Emacs with client-emacs/margin.el  -*- lexical-binding: t; -*-
;; Settings from `eglot-workspace-configuration' (the project's .dir-locals.el: they may only
;; narrow what the user set, here edit-ops' window lowered to 6000 tokens), then with the
;; commands of client-emacs/margin.el: `margin-chat', `margin-explain', `margin-edit' and
;; `margin-apply' (eglot asks before the edit, as its default does, and is answered yes), and a
;; second proposal refused as stale after the buffer was edited in its region — by
;; `margin-apply' and by the command margin.applyOps — leaving the buffer as it was.
;; Environment: MARGIN_EMACS_FILE, MARGIN_EMACS_CLIENT (the folder of margin.el),
;; MARGIN_EMACS_OUT.

(load (expand-file-name "harness.el" (file-name-directory load-file-name)) nil t)
(margin-h-watchdog 240)
(add-to-list 'load-path (getenv "MARGIN_EMACS_CLIENT"))
(require 'margin)

(defun chat-editops-text () (buffer-substring-no-properties (point-min) (point-max)))

(let (buffer)
  (margin-h-step "open"
    (setq buffer (margin-h-open (getenv "MARGIN_EMACS_FILE")))
    (with-current-buffer buffer
      (margin-h-put 'workspace_configuration (eglot--workspace-configuration-plist (eglot-current-server)))
      ;; Margin pulls the `margin' section at start-up: wait until edit-ops' window is lowered by it.
      (margin-h-wait "edit-ops' window from eglot-workspace-configuration"
                     (lambda () (equal (plist-get (plist-get (plist-get (margin-status) :profiles) :chatOps)
                                                  :contextWindow)
                                       6000)))))
  (margin-h-step "chat"
    (with-current-buffer buffer
      (let ((result (margin-chat "What does total do? 😀")))
        (margin-h-put 'chat_reply (plist-get result :reply))
        (margin-h-put 'chat_thread (if (plist-get result :threadId) t :json-false))
        (margin-h-put 'chat_shown (with-current-buffer "*margin*" (buffer-string))))))
  (margin-h-step "explain"
    (with-current-buffer buffer
      (let ((result (margin-explain "And now?")))
        (margin-h-put 'explain_sections (vconcat (mapcar (lambda (s) (plist-get s :name))
                                                         (plist-get (plist-get result :budget) :sections))))
        (margin-h-put 'explain_last_message (plist-get (car (last (append (plist-get result :messages) nil)))
                                                       :content)))))
  (margin-h-step "edit-ops: propose and apply"
    (with-current-buffer buffer
      (let ((result (margin-edit "call it sum_to")))
        (margin-h-put 'proposal_ops (length (plist-get result :ops)))
        (margin-h-put 'proposal_shown (with-current-buffer "*margin-edit*" (buffer-string))))
      (margin-h-put 'before_apply (chat-editops-text))
      ;; eglot's default: it asks before a server's edit; the person says yes.
      (let ((eglot-confirm-server-initiated-edits 'confirm)
            (asked nil))
        (cl-letf (((symbol-function 'y-or-n-p) (lambda (prompt) (push prompt asked) t)))
          (let ((outcome (margin-apply)))
            (margin-h-put 'applied (plist-get outcome :applied))
            (margin-h-put 'rebased (plist-get outcome :rebased))))
        (margin-h-put 'asked (vconcat asked)))
      (margin-h-put 'after_apply (chat-editops-text))
      (save-buffer)
      (margin-h-record-copy 'saved)))
  (margin-h-step "edit-ops: stale"
    (with-current-buffer buffer
      (let ((result (margin-edit "print a bigger total")))
        (margin-h-put 'stale_proposal_ops (length (plist-get result :ops))))
      ;; The person edits the very line the proposal replaces, before applying it.
      (goto-char (point-min))
      (search-forward "sum_to(3)")
      (replace-match "sum_to(4) 🙂" t t)
      (margin-h-put 'before_stale (chat-editops-text))
      (let ((outcome (margin-apply)))
        (margin-h-put 'stale_applied (plist-get outcome :applied))
        (margin-h-put 'stale_files (plist-get outcome :staleFiles))
        (margin-h-put 'stale_reason (plist-get outcome :failureReason)))
      ;; The same proposal through the command margin.applyOps, as eglot runs commands.
      (cl-destructuring-bind (_buffer _params result) margin--proposal
        (let ((outcome (eglot-execute-command
                        (eglot-current-server) 'margin.applyOps
                        (vector (list :ops (plist-get result :ops)
                                      :baseFingerprints (plist-get result :baseFingerprints)
                                      :textDocument (eglot--TextDocumentIdentifier))))))
          (margin-h-put 'command_stale_applied (plist-get outcome :applied))
          (margin-h-put 'command_stale_files (plist-get outcome :staleFiles))))
      (margin-h-put 'after_stale (chat-editops-text))
      (margin-h-record-copy 'stale_copy)
      (save-buffer)))
  (margin-h-step "stop"
    (margin-h-put 'stopped (with-current-buffer buffer (margin-h-stop))))
  (margin-h-finish))
