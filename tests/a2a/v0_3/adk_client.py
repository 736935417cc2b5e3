#!/usr/bin/env python3
"""google-adk 2.13.0's `RemoteA2aAgent` on a2a-sdk 0.3.26 (its 0.3 client): a message sent to a
remote A2A agent from its card URL, through an ADK Runner, and the texts it hands back.

    PYTHONPATH=<google-adk with a2a-sdk 0.3, see tests/requirements/v0_3/adk.txt> \\
        adk_client.py --card-url URL [--text T]

Prints one JSON document: `{"a2a_sdk": version, "texts": [...], "error"?}`. Used by
tests/it/a2a_v0_3.rs.
"""

import argparse
import asyncio
import importlib.metadata
import json
import sys


async def run(args):
    from google.adk.agents.remote_a2a_agent import RemoteA2aAgent
    from google.adk.runners import Runner
    from google.adk.sessions import InMemorySessionService
    from google.genai import types

    agent = RemoteA2aAgent(name='remote', agent_card=args.card_url)
    runner = Runner(app_name='gw-test', agent=agent, session_service=InMemorySessionService())
    session = await runner.session_service.create_session(app_name='gw-test', user_id='u')
    texts = []
    message = types.Content(role='user', parts=[types.Part(text=args.text)])
    async for event in runner.run_async(user_id='u', session_id=session.id, new_message=message):
        if event.error_message:
            return {'error': event.error_message, 'texts': texts}
        for part in (event.content.parts if event.content else None) or []:
            if part.text:
                texts.append(part.text)
    return {'texts': texts}


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument('--card-url', required=True)
    p.add_argument('--text', default='hello')
    args = p.parse_args()
    out = asyncio.run(run(args))
    out['a2a_sdk'] = importlib.metadata.version('a2a-sdk')
    json.dump(out, sys.stdout, sort_keys=True)
    sys.stdout.write('\n')


if __name__ == '__main__':
    main()
