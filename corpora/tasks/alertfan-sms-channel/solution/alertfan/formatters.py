"""One formatter per channel: alert -> the text that channel carries."""

from __future__ import annotations

from alertfan.alert import Alert


def format_email(alert: Alert) -> str:
    return f"Subject: [{alert.severity.upper()}] {alert.title}\n\n{alert.body}\n\nsource: {alert.source}"


def format_slack(alert: Alert) -> str:
    return f":rotating_light: *{alert.title}* ({alert.severity}) from `{alert.source}`\n{alert.body}"


def format_sms(alert: Alert) -> str:
    text = f"{alert.severity.upper()}: {alert.title} ({alert.source})"
    return text[:160]


FORMATTERS = {
    "email": format_email,
    "slack": format_slack,
    "sms": format_sms,
}
