"""Trust: who a caller is and what they can prove. Caller authentication (bearer tokens,
client certificates), the TLS files and their reload, message signers checked against the
sender's agent card, and the audit trail's records."""
